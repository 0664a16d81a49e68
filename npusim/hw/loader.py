"""Loading hardware descriptions from YAML into ``Hardware``.

The loader knows no field by name (except ``clock``, which B/cycle bandwidths need):
it walks the dataclasses of ``npusim.hw.config`` and parses every value according
to its field's ``quantity`` metadata. A file is read in three steps:

1. read: YAML (safe loader, duplicate keys rejected; ``npusim.hw.yaml_file``) -> a mapping;
2. flatten: the mapping -> ``{dotted key: (raw value, file that set it)}``, rejecting
   unknown keys; ``extends: base`` loads the base first and the file's own keys
   replace the base's key by key (a deep merge);
3. build: parse each raw value with ``npusim.util.units``, check its range, construct the
   frozen dataclasses, then cross-check fields that constrain each other.

Every problem is a ``ConfigError`` naming the file, the dotted key, the value and
what was expected, e.g.
``hw_configs/x.yaml: scratchpad.size = '1 MB/s': unknown size unit 'MB/s' ...``.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import re
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from npusim.util import units
from npusim.dram.mapping import check_own
from npusim.errors import ConfigError
from npusim.hw.config import LOOP_DIMS, OPERANDS, CACTI_MIN_BYTES, Hardware, LocalLevel
from npusim.util import env_knobs
from npusim.util.resources import find_resource, list_resources, missing_resource_message, search_dirs
from npusim.hw.yaml_file import display_path, read_yaml, short

KIND = "hw_configs"
EXTENDS_KEY = "extends"
# Bandwidths given in B/cycle are converted with this top-level field.
CLOCK_KEY = "clock"
# The name is not inherited through `extends`: a variant is its own configuration.
NAME_KEY = "name"

# Quantities whose values must be > 0; every other number must be >= 0.
STRICTLY_POSITIVE = {"size", "frequency", "bandwidth", "int"}
# Largest value of a quantity the loader accepts (a field's own ``maximum`` may be lower):
# far beyond any hardware, and low enough that the products a simulation forms (energy x
# count, power x seconds, latency x transfers) stay finite instead of printing inf.
QUANTITY_MAXIMUM = {
    "energy": 1e12,      # pJ: 1 J per access or byte
    "power": 1e6,        # W
    "time": 1.0,         # s: a 1 s DRAM latency
    "cycles": 1e12,
    "frequency": 1e13,   # Hz: 10 THz
    "bandwidth": 1e16,   # B/s: 10 PB/s
    "area": 1e6,         # mm^2
}


@dataclass(frozen=True)
class Setting:
    """One raw value from a file, remembered with the file that set it (for messages)."""

    value: object
    origin: str


Settings = dict[str, Setting]


# ---------------------------------------------------------------- public API


def load_hardware(source: str | os.PathLike, *, overrides: Mapping[str, object] | None = None) -> Hardware:
    """Load a hardware description by path or by shipped name (e.g. ``"edge-npu"``).

    ``overrides`` maps dotted keys to raw values, parsed like YAML values and applied
    last, e.g. ``{"scratchpad.size": "256KiB"}`` (how ``--set`` and sweeps change a knob).
    """
    path = resolve_hardware_path(source)
    settings = read_settings(path)
    if overrides:
        written = {key: _as_yaml_scalar(value) for key, value in overrides.items()}
        settings.update(flatten(nest_dotted(written, "overrides"), "overrides"))
    return build_hardware(settings, default_name=_stem(path), origin=display_path(path))


def hardware_from_mapping(data: Mapping, *, origin: str = "<mapping>",
                          base_dir: str | os.PathLike = ".") -> Hardware:
    """Build ``Hardware`` from an already-parsed mapping (same rules as a YAML file)."""
    settings = _merge_over_base(data, Path(base_dir), origin, chain=())
    return build_hardware(settings, default_name=Hardware().name, origin=origin)


def resolve_hardware_path(name: str | os.PathLike) -> Path:
    """The YAML file for ``name``: the path as given, else a shipped or local config name."""
    path = Path(name)
    for candidate in (path, Path(f"{path}.yaml"), Path(f"{path}.yml")):
        if candidate.is_file():
            return candidate
    if path.name == str(name):  # a bare name, not a path into some folder
        found = find_resource(KIND, str(name))
        if found is not None:
            return found
    raise ConfigError(f"{name}: hardware config not found; {missing_resource_message(KIND, str(name))}")


def list_hardware() -> list[str]:
    """Names of the hardware configs that ``load_hardware`` finds by name."""
    return list_resources(KIND)


def hardware_to_dict(hw: Hardware) -> dict:
    """Plain nested dict of every field in base units (bytes, Hz, B/s, pJ, W, s, cycles), in the
    shape the loader reads: ``cores.unroll`` a mapping, ``cores.levels`` a mapping of level name
    -> its fields (``shared_over: all`` for a level shared by the whole array)."""
    out = dataclasses.asdict(hw)
    cores = out["cores"]
    cores["unroll"] = dict(hw.cores.unroll)
    cores["systolic"] = list(hw.cores.systolic)
    levels = {}
    for lv in hw.cores.levels:
        spec = {k: v for k, v in dataclasses.asdict(lv).items() if k != "name"}
        spec["operands"] = list(lv.operands)
        spec["shared_over"] = "all" if lv.shared_over is None else list(lv.shared_over)
        levels[lv.name] = spec
    cores["levels"] = levels
    return out


def iter_knobs(cls: type = Hardware, prefix: str = "") -> Iterator[tuple[str, dataclasses.Field]]:
    """Every leaf field of ``cls`` as (dotted key, field), in declaration order."""
    for field in dataclasses.fields(cls):
        block = block_type(cls, field.name)
        if block is None:
            yield prefix + field.name, field
        else:
            yield from iter_knobs(block, f"{prefix}{field.name}.")


def block_type(cls: type, field_name: str) -> type | None:
    """The dataclass type of a nested block field (cores, dma, ...), or None for a leaf."""
    hint = _type_hints(cls)[field_name]
    return hint if dataclasses.is_dataclass(hint) else None


# ---------------------------------------------------------------- step 2: flatten and merge


def read_settings(path: Path, chain: tuple[Path, ...] = ()) -> Settings:
    """Flattened settings of ``path`` with its ``extends`` chain merged underneath."""
    real = path.resolve()
    if real in chain:
        cycle = " -> ".join(display_path(p) for p in (*chain, real))
        raise ConfigError(f"{display_path(path)}: 'extends' forms a cycle: {cycle}")
    return _merge_over_base(read_yaml(path, quote=not chain), path.parent, display_path(path), (*chain, real))


def _merge_over_base(data: Mapping, folder: Path, origin: str, chain: tuple[Path, ...]) -> Settings:
    """Settings of ``data`` over those of its ``extends`` base (resolved from ``folder``)."""
    data = dict(data)
    settings = _settings_of_base(data.pop(EXTENDS_KEY, None), folder, origin, chain)
    own = flatten(data, origin)
    settings.pop(NAME_KEY, None)  # a variant is its own configuration, not its base
    settings.update(own)  # the deep merge: own keys replace the base's, key by key
    return settings


def _settings_of_base(base: object, folder: Path, origin: str, chain: tuple[Path, ...]) -> Settings:
    if base is None:
        return {}
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"{origin}: {EXTENDS_KEY} = {base!r}: expected the name or relative "
                          f"path of another hardware config, e.g. 'edge-npu'")
    return read_settings(_resolve_base(base, folder, origin), chain)


def _resolve_base(base: str, folder: Path, origin: str) -> Path:
    """A base is a YAML file looked up next to the extending file first, then by name.

    It must resolve (symlinks and ``..`` followed) to a ``.yaml``/``.yml`` file inside the
    extending file's folder, a shipped config folder or a folder of ``NPUSIM_HW_PATH``:
    a config cannot make npusim open ``/etc/passwd`` or ``../../secrets``.
    """
    roots = _extends_roots(folder)
    outside = False  # a candidate outside the roots is not even probed (no existence oracle)
    for candidate in (folder / base, folder / f"{base}.yaml", folder / f"{base}.yml"):
        if not _inside(candidate, roots):
            outside = True
        elif candidate.is_file():
            return _allowed_base(candidate, base, origin, roots)
    found = find_resource(KIND, base) if Path(base).name == base else None
    if found is None:
        for extra in env_knobs.hw_search_path():
            found = next((c for c in (extra / base, extra / f"{base}.yaml", extra / f"{base}.yml")
                          if _inside(c, roots) and c.is_file()), None)
            if found is not None:
                break
    if found is None and outside:
        raise ConfigError(_outside_message(origin, base))
    if found is None:
        raise ConfigError(f"{origin}: {EXTENDS_KEY} = {base!r}: not found next to the file nor by "
                          f"name; {missing_resource_message(KIND, base)}")
    return _allowed_base(found, base, origin, roots)


def _inside(path: Path, roots: list[Path]) -> bool:
    try:
        real = path.resolve()
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a symlink loop: not a config we allow
        return False
    return any(real.is_relative_to(root) for root in roots)


def _outside_message(origin: str, base: str) -> str:
    return (f"{origin}: {EXTENDS_KEY} = {base!r}: outside the config's folder, the shipped configs and "
            f"{env_knobs.HW_PATH}; move the base next to the config or add its folder to {env_knobs.HW_PATH}")


def _extends_roots(folder: Path) -> list[Path]:
    return [p.resolve() for p in (folder, *search_dirs(KIND), *env_knobs.hw_search_path())]


def _allowed_base(candidate: Path, base: str, origin: str, roots: list[Path]) -> Path:
    if not _inside(candidate, roots):
        raise ConfigError(_outside_message(origin, base))
    real = candidate.resolve()
    if real.suffix.lower() not in (".yaml", ".yml"):
        raise ConfigError(f"{origin}: {EXTENDS_KEY} = {base!r}: resolves to a file that is not .yaml/.yml; "
                          "expected another hardware config")
    return candidate


def flatten(mapping: Mapping, origin: str, cls: type = Hardware, prefix: str = "") -> Settings:
    """``{dotted key: Setting}`` of a (nested) mapping, checked against the fields of ``cls``."""
    fields = {field.name: field for field in dataclasses.fields(cls)}
    names = list(fields)
    settings: Settings = {}
    for key, value in mapping.items():
        if key not in names:
            raise ConfigError(_unknown_key_message(origin, prefix, key, names))
        dotted = prefix + key
        block = block_type(cls, key)
        if block is None and fields[key].metadata.get("quantity") == LEVELS:
            settings.update(_flatten_levels(value, origin, dotted))
        elif block is None:
            settings[dotted] = Setting(value, origin)
        elif value is not None:  # an empty block (all lines commented out) changes nothing
            if not isinstance(value, Mapping):
                raise ConfigError(f"{origin}: {dotted} = {short(value)}: expected a mapping of "
                                  f"{', '.join(f.name for f in dataclasses.fields(block))}")
            settings.update(flatten(value, origin, block, dotted + "."))
    return settings


LEVELS = "levels"
#: The fields of one local level (``cores.levels.NAME.FIELD``); ``name`` is the key itself.
LEVEL_FIELDS = {f.name: f for f in dataclasses.fields(LocalLevel) if f.name != "name"}


def _flatten_levels(value: object, origin: str, dotted: str) -> Settings:
    """``cores.levels``: a mapping of level name -> its fields, flattened to
    ``cores.levels.NAME.FIELD`` so that a variant or ``--set`` changes one field of one level
    (a level set to null is removed, ``cores.levels.NAME = null``)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{origin}: {dotted} = {short(value)}: expected a mapping of level name -> "
                          f"its fields ({', '.join(LEVEL_FIELDS)}), innermost level first")
    settings: Settings = {}
    for name, spec in value.items():
        if not isinstance(name, str) or not name.replace("_", "").isalnum():
            raise ConfigError(f"{origin}: {dotted}: level name {short(name)}: expected letters, digits and _")
        key = f"{dotted}.{name}"
        if spec is None:
            settings[key] = Setting(None, origin)
            continue
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{origin}: {key} = {short(spec)}: expected a mapping of {', '.join(LEVEL_FIELDS)}")
        settings[key] = Setting({}, origin)  # the level exists (in this order) even if it sets no field
        for field_name, raw in spec.items():
            if field_name not in LEVEL_FIELDS:
                raise ConfigError(_unknown_key_message(origin, key + ".", field_name, list(LEVEL_FIELDS)))
            settings[f"{key}.{field_name}"] = Setting(raw, origin)
    return settings


def _build_levels(settings: Settings, dotted: str, clock_hz: float) -> tuple[LocalLevel, ...]:
    """The levels of ``cores.levels.*`` settings, in the order their names first appear."""
    prefix = dotted + "."
    order: dict[str, bool] = {}
    for key, setting in settings.items():
        if key.startswith(prefix):
            name = key[len(prefix):].split(".", 1)[0]
            if key == prefix + name:
                order.pop(name, None)
                order[name] = setting.value is not None  # null: removed (a later setting re-adds it)
            else:
                order.setdefault(name, True)
    levels = []
    for name, present in order.items():
        if not present:
            continue
        kwargs = {}
        for field_name, field in LEVEL_FIELDS.items():
            key = f"{prefix}{name}.{field_name}"
            if key in settings:
                kwargs[field_name] = parse_value(key, settings[key], field, clock_hz)
        levels.append(LocalLevel(name=name, **kwargs))
    return tuple(levels)


def _as_yaml_scalar(value: object) -> object:
    """A command-line string read as YAML would read it ("2" -> 2, "256KiB" stays text), but
    for a decimal with leading zeros: "010" is 10 on a command line, not YAML 1.1's octal 8."""
    if not isinstance(value, str):
        return value
    if re.fullmatch(r"[+-]?0[0-9]+", value.strip()):
        return int(value.strip(), 10)
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    return parsed if isinstance(parsed, (int, float, bool, str)) else value


def nest_dotted(flat: Mapping[str, object], origin: str) -> dict:
    """``{"a.b": v}`` -> ``{"a": {"b": v}}`` (overrides are written with dotted keys)."""
    nested: dict = {}
    for dotted, value in flat.items():
        *blocks, leaf = str(dotted).split(".")
        target = nested
        for block in blocks:
            target = target.setdefault(block, {})
            if not isinstance(target, dict):
                raise ConfigError(f"{origin}: {dotted}: {block!r} is a value, not a block")
        target[leaf] = value
    return nested


def _unknown_key_message(origin: str, prefix: str, key: object, names: list[str]) -> str:
    message = f"{origin}: unknown key {prefix}{key}"
    suggestion = _closest_key(key, prefix, names)
    if suggestion:
        message += f"; did you mean {suggestion!r}?"
    where = f"in {prefix[:-1]}" if prefix else "at the top level"
    return message + f"; valid keys {where}: {', '.join(names)}"


def _closest_key(key: object, prefix: str, names: list[str]) -> str | None:
    """The nearest sibling key, else the nearest key anywhere (a knob put in the wrong block)."""
    text = str(key)
    close = difflib.get_close_matches(text, names, n=1, cutoff=0.6)
    if close:
        return prefix + close[0]
    everywhere = {dotted.rsplit(".", 1)[-1]: dotted for dotted, _ in iter_knobs()}
    close = difflib.get_close_matches(text, list(everywhere), n=1, cutoff=0.85)  # (dram.ranks is not scratchpad.banks: 0.8)
    return everywhere[close[0]] if close else None


# ---------------------------------------------------------------- step 3: build


def build_hardware(settings: Settings, *, default_name: str, origin: str) -> Hardware:
    """Parse every setting, construct ``Hardware`` and cross-check it."""
    settings = dict(settings)
    settings.setdefault(NAME_KEY, Setting(default_name, origin))
    clock_hz = _parse_clock(settings)
    hw = _build(Hardware, settings, "", clock_hz)
    _cross_check(hw, settings, origin)
    return hw


def _parse_clock(settings: Settings) -> float:
    field = next(f for f in dataclasses.fields(Hardware) if f.name == CLOCK_KEY)
    if CLOCK_KEY not in settings:
        return field.default
    return parse_value(CLOCK_KEY, settings[CLOCK_KEY], field, clock_hz=None)


def _build(cls: type, settings: Settings, prefix: str, clock_hz: float):
    kwargs = {}
    for field in dataclasses.fields(cls):
        dotted = prefix + field.name
        block = block_type(cls, field.name)
        if block is not None:
            kwargs[field.name] = _build(block, settings, dotted + ".", clock_hz)
        elif field.metadata.get("quantity") == LEVELS:
            kwargs[field.name] = _build_levels(settings, dotted, clock_hz)
        elif dotted in settings:
            kwargs[field.name] = parse_value(dotted, settings[dotted], field, clock_hz)
    return cls(**kwargs)


def parse_value(dotted: str, setting: Setting, field: dataclasses.Field, clock_hz: float | None):
    """The value of one field in its base unit, or a ConfigError saying what was expected."""
    quantity = field.metadata["quantity"]
    if setting.value is None and field.default is None:
        return None  # null: the figure is derived from the components (npusim.hw.silicon)
    if quantity in STRUCTURED:
        try:
            return STRUCTURED[quantity](setting.value)
        except units.UnitError as error:
            raise ConfigError(f"{setting.origin}: {dotted} = {short(setting.value)}: {error}") from error
    if isinstance(setting.value, (list, dict)):  # never formatted in full: it may be an alias bomb
        such = {"int": "16", "str": "text", "bool": "true",
                "choice": ", ".join(field.metadata.get("choices", ()))}.get(quantity)
        such = repr(units.example(quantity)) if such is None else such
        raise ConfigError(f"{setting.origin}: {dotted} = {short(setting.value)}: expected a single "
                          f"{_kind(quantity)} such as {such}, got {_a_type(setting.value)}")
    try:
        if quantity == "int":
            value = _parse_int(setting.value)
        elif quantity == "str":
            value = _parse_text(setting.value)
        elif quantity == "bool":
            value = _parse_bool(setting.value)
        elif quantity == "choice":
            value = parse_choice(setting.value, field.metadata["choices"])
        elif quantity == "size":
            value = units.parse_size(setting.value)
        else:
            value = units.parse(setting.value, quantity, clock_hz=clock_hz)
        check_range(value, quantity, field.metadata.get("maximum"), field.metadata.get("minimum"))
    except units.UnitError as error:
        raise ConfigError(f"{setting.origin}: {dotted} = {short(setting.value)}: {error}") from error
    return value


def _parse_unroll(value: object) -> tuple[tuple[str, int], ...]:
    """``{K: 32, C: 2}`` (one array dimension per entry, in order) or the text ``K32xC2``."""
    if isinstance(value, str):
        value = _unroll_text(value)
    if not isinstance(value, Mapping):
        raise units.UnitError("expected a mapping of loop dimension -> unroll, e.g. {K: 32, C: 2, OX: 4, OY: 4}, "
                              "or the text K32xC2xOX4xOY4")
    out = []
    for dim, factor in value.items():
        if dim not in LOOP_DIMS:
            raise units.UnitError(f"unknown loop dimension {short(dim)}; expected one of {', '.join(LOOP_DIMS)}")
        if isinstance(factor, bool) or not isinstance(factor, int) or not 1 <= factor <= 1 << 16:
            raise units.UnitError(f"{dim}: {short(factor)}: expected a whole number from 1 to 65536")
        out.append((dim, factor))
    return tuple(out)


def _unroll_text(text: str) -> dict:
    parts = [p for p in text.replace(" ", "").split("x") if p]
    out = {}
    for part in parts:
        m = re.fullmatch(r"([A-Z]+)(\d+)", part)
        if m is None:
            raise units.UnitError(f"{part!r}: expected a loop dimension and its unroll, e.g. K32xC2xOX4xOY4")
        if m.group(1) in out:
            raise units.UnitError(f"{m.group(1)} is unrolled twice")
        out[m.group(1)] = int(m.group(2))
    return out


def _parse_dims(value: object) -> tuple[str, ...] | None:
    """A list of loop dimensions (``[OX, OY]``, or the text ``OX,OY``); ``all``: every one (None)."""
    if value == "all":
        return None
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)):
        raise units.UnitError("expected a list of loop dimensions such as [OX, OY], or all")
    for dim in value:
        if dim not in LOOP_DIMS:
            raise units.UnitError(f"unknown loop dimension {short(dim)}; expected one of {', '.join(LOOP_DIMS)}")
    if len(set(value)) != len(value):
        raise units.UnitError("a dimension is listed twice")
    return tuple(value)


def _parse_operands(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not value:
        raise units.UnitError("expected a list of operands such as [W] or [I, O]")
    for op in value:
        if op not in OPERANDS:
            raise units.UnitError(f"unknown operand {short(op)}; expected W (weights), I (inputs) or O (outputs)")
    if len(set(value)) != len(value):
        raise units.UnitError("an operand is listed twice")
    return tuple(value)


#: Quantities whose values are lists or mappings, with their parsers.
STRUCTURED = {"unroll": _parse_unroll, "dims": _parse_dims, "operands": _parse_operands}


def _a_type(value: object) -> str:
    """The value's type with its article, for an error: "an int", "a float"."""
    name = type(value).__name__
    return ("an " if name[0] in "aeiou" else "a ") + name


def _parse_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise units.UnitError(f"expected an integer such as 16, got {_a_type(value)}")
    return value


def _parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise units.UnitError(f"expected true or false, got {short(value)}")


def _parse_text(value: object) -> str:
    if not isinstance(value, str):
        raise units.UnitError(f"expected text, got {_a_type(value)} (quote it in YAML)")
    return value


def parse_choice(value: object, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else UnitError naming them (and the closest)."""
    if value in choices:
        return value
    hint = next((c for c in choices if str(value).lower() == c.lower()), None)
    hint = hint or next(iter(difflib.get_close_matches(str(value), choices, n=1)), None)
    suggestion = f" (did you mean {hint!r}?)" if hint else ""
    raise units.UnitError(f"expected one of {', '.join(choices)}{suggestion}")


def check_range(value: object, quantity: str, maximum: int | None = None, minimum: int | None = None) -> None:
    """``minimum=0`` lets a size or count be 0 (a level that is absent); a positive ``minimum``
    is the least value accepted."""
    if quantity in ("str", "choice", "bool") or quantity in STRUCTURED:
        return
    if maximum is None:
        maximum = QUANTITY_MAXIMUM.get(quantity)
    if maximum is not None and value > maximum:
        shown = f"{maximum:,}" if isinstance(maximum, int) else f"{maximum:g}"
        raise units.UnitError(f"expected at most {shown} {_base_unit(quantity)}(a larger value models no NPU "
                              "and would only exhaust this machine or overflow its figures)")
    if quantity in STRICTLY_POSITIVE and value <= 0 and minimum != 0:
        raise units.UnitError(f"expected {_a_kind(quantity)} greater than 0")
    if minimum and value < minimum:
        shown = f"{minimum:,}" if isinstance(minimum, int) else f"{minimum:g}"
        raise units.UnitError(f"expected at least {shown} {_base_unit(quantity)}(a smaller value models no NPU, and "
                              "the simulated times would lose the resolution the DRAM's timing needs)")
    if value < 0:
        raise units.UnitError(f"expected {_a_kind(quantity)} of 0 or more")


def _base_unit(quantity: str) -> str:
    table = units.QUANTITY_UNITS.get(quantity)
    base = next((u for u, factor in table.items() if factor == 1), "") if table else ""
    return f"{base} " if base else ""


def _kind(quantity: str) -> str:
    return "whole number" if quantity == "int" else quantity


def _a_kind(quantity: str) -> str:
    """What the value must be, with its article: "a whole number", "an energy"."""
    name = _kind(quantity)
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


def _cross_check(hw: Hardware, settings: Settings, origin: str) -> None:
    """Rules between fields: alignment fits the scratchpad; sizes the DMA rounds to are 2^k."""
    alignment, size = hw.scratchpad.alignment, hw.scratchpad.size
    if not _is_power_of_two(alignment):
        _fail(settings, origin, "scratchpad.alignment", alignment, "expected a power of two such as 64")
    if alignment > size:
        if settings.get("scratchpad.size", Setting(0, "")).origin == "overrides" and \
                settings.get("scratchpad.alignment", Setting(0, "")).origin != "overrides":  # (blame the value just given)
            _fail(settings, origin, "scratchpad.size", size, f"smaller than scratchpad.alignment = "
                  f"{units.format_bytes(alignment)}")
        _fail(settings, origin, "scratchpad.alignment", alignment,
              f"larger than scratchpad.size = {units.format_bytes(size)}")
    burst = hw.dma.burst_bytes
    if not _is_power_of_two(burst):
        _fail(settings, origin, "dma.burst_bytes", burst, "expected a power of two such as 64")
    for key, value in (("dram.channels", hw.dram.channels), ("dram.mapping", hw.dram.mapping)):
        try:  # (wrong whatever the model: the bandwidth model's config would pass doctor with them)
            check_own(key, value)
        except ValueError as error:
            _fail(settings, origin, key, value, str(error))
    if hw.dram.model == "banks":
        from npusim.dram.model import check_dram  # lazy: the device model, only for configs that use it
        problem = check_dram(hw)
        if problem is not None:
            _fail(settings, origin, *problem)
    _check_unrolled_core(hw, settings, origin)


def _check_unrolled_core(hw: Hardware, settings: Settings, origin: str) -> None:
    """An unrolled array and its levels: dimensions unrolled once, systolic and shared
    dimensions among them, every level's energy known, no second register model beside it."""
    c = hw.cores
    dims = [d for d, _ in c.unroll]
    if len(set(dims)) != len(dims):
        _fail(settings, origin, "cores.unroll", dict(c.unroll), "a loop dimension is unrolled twice")
    for d in c.systolic:
        if d not in dims:
            _fail(settings, origin, "cores.systolic", list(c.systolic), f"{d} is not unrolled (cores.unroll: "
                  f"{', '.join(dims) or 'empty'})")
    if c.levels and not c.unroll:
        _fail(settings, origin, "cores.levels", [lv.name for lv in c.levels], "local levels need cores.unroll "
              "(which array dimensions share them)")
    if c.unroll and (c.stationary_register or c.accumulator_register):
        _fail(settings, origin, "cores.stationary_register", c.stationary_register, "an unrolled core describes "
              "its registers as cores.levels, not stationary_register / accumulator_register")
    for lv in c.levels:
        key = f"cores.levels.{lv.name}"
        for d in lv.shared_over or ():
            if d not in dims:
                _fail(settings, origin, f"{key}.shared_over", list(lv.shared_over), f"{d} is not unrolled "
                      f"(cores.unroll: {', '.join(dims)})")
        if lv.size < CACTI_MIN_BYTES and (lv.read_energy is None or lv.write_energy is None):
            _fail(settings, origin, f"{key}.size", lv.size, f"below {CACTI_MIN_BYTES} B the CACTI table has no "
                  "figure: set read_energy and write_energy")
        if lv.min_access_bits > lv.port_bits:
            _fail(settings, origin, f"{key}.min_access_bits", lv.min_access_bits,
                  f"above port_bits = {lv.port_bits}")


def _fail(settings: Settings, origin: str, dotted: str, value: object, reason: str) -> typing.NoReturn:
    """The one-line error of field ``dotted``, named by the file that set it; a value inherited
    from a base says which config extends it (the problem may be the combination)."""
    setting = settings.get(dotted, Setting(value, f"{origin} (default)"))
    where = setting.origin
    if where not in (origin, "overrides") and not where.endswith("(default)"):
        where = f"{where} (extended by {origin})"
    raise ConfigError(f"{where}: {dotted} = {short(setting.value)}: {reason}")


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


# ---------------------------------------------------------------- helpers


@functools.cache
def _type_hints(cls: type) -> dict[str, object]:
    return typing.get_type_hints(cls)


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".yaml", ".yml"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem
