"""Hardware: typed configuration dataclasses and their YAML loader."""

from npusim.hw.config import Hardware

__all__ = ["Hardware"]
