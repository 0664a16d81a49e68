"""The subset of JSON Schema (draft 2020-12) that npusim's shipped schemas use, checked in
pure Python: the first violation, as a path and a phrase saying what was expected.

The schemas in ``npusim/schemas/`` are the declared contracts of the trace and plan formats;
this module reads them, so the contract and the check are one document. It implements
``type``, ``enum``, ``const``, ``properties``, ``required``, ``additionalProperties``,
``propertyNames``, ``maxProperties``, ``items``, ``minItems``, ``maxItems``, ``minimum``,
``maximum``, ``minLength``, ``maxLength``, ``$ref`` (to ``#/$defs/...``) and ignores
annotations (``description``, ``title``, ``$comment``, ``examples``). One difference from the
reference implementation: an ``integer`` is an int, never a float like ``3.0`` (the formats
never write one). ``tests/test_trace_contract.py`` checks that whatever this accepts, the
``jsonschema`` package accepts too.

Why not ``jsonschema`` itself: its messages name JSON paths, not the op or tensor at fault,
and it walks a 50,000-op trace several times slower than this one pass.
"""

from __future__ import annotations

import functools
import json
import reprlib
from pathlib import Path

from npusim.errors import did_you_mean

SCHEMA_FOLDER = Path(__file__).resolve().parents[1] / "schemas"

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
_ARTICLE = {"object": "an object", "array": "a list", "string": "a string", "integer": "an integer",
            "number": "a number", "boolean": "true or false", "null": "null"}


class SchemaViolation(Exception):
    """``path``: keys and indices from the document's root; ``expected``: what was wanted."""

    def __init__(self, path: tuple, value, expected: str):
        super().__init__(f"{format_path(path)} is {short(value)}, expected {expected}")
        self.path, self.value, self.expected = path, value, expected


@functools.cache
def load_schema(name: str) -> dict:
    """A shipped schema by file name (``trace.schema.json``)."""
    return json.loads((SCHEMA_FOLDER / name).read_text())


def check(instance, schema: dict) -> None:
    """Raise ``SchemaViolation`` at the first place ``instance`` breaks ``schema``."""
    _check(instance, schema, schema, ())


def _resolve(schema: dict, root: dict) -> dict:
    while "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"unsupported $ref {ref!r}")
        schema = root["$defs"][ref[len("#/$defs/"):]]
    return schema


def _check(value, schema: dict, root: dict, path: tuple) -> None:
    schema = _resolve(schema, root)
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](value) for t in names):
            raise SchemaViolation(path, value, describe(schema))
    if "const" in schema and value != schema["const"]:
        raise SchemaViolation(path, value, describe(schema))
    if "enum" in schema and value not in schema["enum"]:
        raise SchemaViolation(path, value, describe(schema))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if ("minimum" in schema and value < schema["minimum"]) or ("maximum" in schema and value > schema["maximum"]):
            raise SchemaViolation(path, value, describe(schema))
    elif isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", len(value)):
            raise SchemaViolation(path, value, describe(schema))
    elif isinstance(value, list):
        _check_array(value, schema, root, path)
    elif isinstance(value, dict):
        _check_object(value, schema, root, path)


def _check_array(value: list, schema: dict, root: dict, path: tuple) -> None:
    if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
        raise SchemaViolation(path, value, describe(schema))
    items = schema.get("items")
    if items is not None:
        for i, item in enumerate(value):
            _check(item, items, root, path + (i,))


def _check_object(value: dict, schema: dict, root: dict, path: tuple) -> None:
    if len(value) > schema.get("maxProperties", len(value)):
        raise SchemaViolation(path, f"<{len(value)} fields>", f"at most {schema['maxProperties']} fields")
    properties = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in value:
            wanted = _resolve(properties.get(key, {}), root)
            raise SchemaViolation(path + (key,), _MISSING, f"{describe(wanted)} (a required field)")
    extra = schema.get("additionalProperties", True)
    names = schema.get("propertyNames")
    for key, item in value.items():
        if names is not None:
            _check(key, names, root, path + (key,))
        if key in properties:
            _check(item, properties[key], root, path + (key,))
        elif extra is False:
            raise SchemaViolation(path + (key,), item, "no such field: one of " + ", ".join(properties)
                                  + did_you_mean(key, properties))
        elif isinstance(extra, dict):
            _check(item, extra, root, path + (key,))


class _Missing:
    def __repr__(self) -> str:
        return "missing"


_MISSING = _Missing()


def describe(schema: dict) -> str:
    """What a schema wants, in words: 'an integer from 1 to 4096', 'a list of at most 32 ...'."""
    if "expect" in schema:  # the schema's own words (an npusim annotation keyword)
        return schema["expect"]
    if "const" in schema:
        return repr(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(map(repr, schema["enum"]))
    types = schema.get("type")
    names = [types] if isinstance(types, str) else list(types or [])
    words = " or ".join(_ARTICLE[t] for t in names) or "a value"
    if "minimum" in schema and "maximum" in schema:
        words += f" from {schema['minimum']:,} to {schema['maximum']:,}"
    elif "minimum" in schema:
        words += f" >= {schema['minimum']:,}"
    elif "maximum" in schema:
        words += f" <= {schema['maximum']:,}"
    if "maxLength" in schema:
        words += f" of {schema.get('minLength', 0)} to {schema['maxLength']:,} characters"
    if "maxItems" in schema:
        words += f" of {schema.get('minItems', 0)} to {schema['maxItems']:,} items"
    elif "minItems" in schema:
        words += f" of at least {schema['minItems']} items"
    return words


def format_path(path: tuple) -> str:
    """('ops', 3, 'gemm', 'm') -> 'ops[3].gemm.m'; a key that is not a short printable name (a
    fuzzed attribute with a line separator, a 10 kB key) as its bounded repr: ops[0].attrs['a\\n']."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not (isinstance(part, str) and part.isprintable() and 0 < len(part) <= 60 and "." not in part):
            text += f"[{short(part, 60)}]"
        else:
            text += f".{part}" if text else part
    return f"field {text}" if text else "the document"


def short(value, limit: int = 80) -> str:
    """A bounded repr: a 5,000-digit integer or a 10 MB string prints as a few dozen characters."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 30:
        return f"an integer of {len(str(abs(value))) if abs(value) < 10 ** 4000 else 'over 4000'} digits"
    text = reprlib.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
