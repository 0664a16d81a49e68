"""``python -m npusim.cli``: the ``npusim`` command."""

from npusim.cli import command

command()
