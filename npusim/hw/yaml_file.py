"""Step 1 of loading hardware (``npusim.hw.loader``): a YAML file to its top-level mapping.

The safe loader with duplicate keys rejected; every problem a ``ConfigError`` that names the
file and the line, quoting at most a bounded repr of the content (a YAML alias bomb cannot
blow a message up, and an ``extends`` base's content is never quoted)."""

from __future__ import annotations

import reprlib
import typing
from pathlib import Path

import yaml

from npusim.errors import ConfigError


class _UniqueKeySafeLoader(yaml.SafeLoader):
    """The safe loader, except that a key given twice is an error, not a silent override."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` merges are meant to be overridden by own keys
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, typing.Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path, quote: bool = True) -> dict:
    """The top-level mapping of a YAML file, with errors that name the file and line.

    ``quote=False`` (an ``extends`` base) keeps the file's content out of the messages."""
    origin = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{origin}: cannot read the file: {error.strerror or error}") from error
    except UnicodeDecodeError as error:
        bad = short(error.object[error.start:error.start + 4]) if quote else "not shown"
        raise ConfigError(f"{origin}: byte {error.start} is not UTF-8 text ({bad}); expected a YAML text file") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeySafeLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as error:
        raise ConfigError(f"{origin}: {_describe_yaml_error(error)}") from error
    except RecursionError:
        raise ConfigError(f"{origin}: invalid YAML: nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as error:  # e.g. a timestamp with month 13
        if "integer string conversion" in str(error):  # (Python's own advice, sys.set_int_max_str_digits, is not the user's)
            raise ConfigError(f"{origin}: invalid YAML value: an integer of more than 4,300 digits; expected a "
                              "number a hardware field can hold") from None
        raise ConfigError(f"{origin}: invalid YAML value: {error}") from None
    if data is None:
        raise ConfigError(f"{origin}: the file is empty; expected a mapping of hardware keys "
                          f"such as {_top_level_example()}")
    if not isinstance(data, dict):
        shown = f" ({short(data)})" if quote else ""
        raise ConfigError(f"{origin}: the top level is a {type(data).__name__}{shown}; "
                          f"expected a mapping of hardware keys such as {_top_level_example()}")
    return data


def _describe_yaml_error(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if mark is None:
        return f"invalid YAML: {problem}"
    return f"line {mark.line + 1}, column {mark.column + 1}: invalid YAML: {problem}"


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when inside it (shorter messages)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _top_level_example() -> str:
    return "clock, cores, scratchpad, dram"


_BOUNDED_REPR = reprlib.Repr()
_BOUNDED_REPR.maxlevel, _BOUNDED_REPR.maxlist, _BOUNDED_REPR.maxdict = 3, 6, 6
_BOUNDED_REPR.maxstring, _BOUNDED_REPR.maxlong, _BOUNDED_REPR.maxother = 60, 40, 60


def short(value: object, limit: int = 60) -> str:
    """A bounded repr: YAML aliases can nest a value exponentially (a "billion laughs")."""
    text = _BOUNDED_REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
