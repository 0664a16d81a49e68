"""Hardware YAML loading: shipped configs, extends, validation and its error messages."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest

import npusim
from npusim.errors import ConfigError, NpusimError
from npusim.hw.config import Hardware
from npusim.hw.docs import format_quantity, generated_section, hardware_reference_markdown
from npusim.hw.loader import (
    hardware_from_mapping,
    hardware_to_dict,
    iter_knobs,
    list_hardware,
    load_hardware,
    resolve_hardware_path,
)
from npusim.util.resources import find_resource, search_dirs
from npusim.util.units import parse

REPO = Path(npusim.__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
SHIPPED = ["edge-npu", "mid-npu", "datacenter-npu"]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def error_of(path_or_name, **kwargs) -> str:
    with pytest.raises(ConfigError) as caught:
        load_hardware(path_or_name, **kwargs)
    return str(caught.value)


# ---------------------------------------------------------------- shipped configs


def test_shipped_configs_are_listed():
    assert set(SHIPPED) <= set(list_hardware())
    assert "_base-npu" not in list_hardware()  # a base, not a product


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_load_and_are_named_after_themselves(name):
    hw = load_hardware(name)
    assert hw.name == name
    assert hw.description
    assert hw.energy.source != Hardware().energy.source  # the shipped table names its own source


def test_edge_npu():
    hw = load_hardware("edge-npu")
    assert (hw.cores.count, hw.cores.pe_rows, hw.cores.pe_cols, hw.cores.dataflow) == (1, 16, 16, "os")
    assert hw.streams == 1
    assert hw.scratchpad.size == 1024**2
    assert hw.clock == 800e6
    assert 12.8e9 <= hw.dram.bandwidth <= 25.6e9
    assert hw.dram.latency == 100e-9
    assert hw.energy.dram_read_byte == hw.energy.dram_write_byte == 64.0  # LPDDR4 8 pJ/bit
    assert hw.energy.mac_int8 == pytest.approx(0.23)


def test_mid_npu():
    hw = load_hardware("mid-npu")
    assert (hw.cores.count, hw.streams, hw.cores.pe_rows, hw.cores.pe_cols) == (2, 2, 32, 32)
    assert hw.scratchpad.size == 4 * 1024**2
    assert hw.dram.bandwidth == 51.2e9


def test_datacenter_npu():
    hw = load_hardware("datacenter-npu")
    assert (hw.cores.pe_rows, hw.cores.pe_cols) == (128, 128)
    assert hw.scratchpad.size == 32 * 1024**2
    assert hw.dram.bandwidth == pytest.approx(819.2e9)
    assert hw.energy.dram_read_byte == pytest.approx(3.9 * 8)  # HBM2 3.9 pJ/bit
    # Inherited from _base-npu, untouched by the override of other energy fields.
    assert hw.energy.mac_fp16 == pytest.approx(1.5)


def test_tiny_fixture_converts_bytes_per_cycle_with_its_clock():
    hw = load_hardware(FIXTURES / "tiny-npu.yaml")
    assert hw.name == "tiny-npu"
    assert hw.dram.bandwidth == 8e9
    assert hw.dram_bytes_per_cycle == 8
    assert hw.scratchpad.size == 4096


def test_bytes_per_cycle_uses_the_clock_of_the_extending_file(tmp_path):
    write(tmp_path, "base.yaml", "clock: 1GHz\ndram: {bandwidth: 16 B/cycle}\n")
    path = write(tmp_path, "slow.yaml", "extends: base\nclock: 500MHz\n")
    assert load_hardware(path).dram.bandwidth == 8e9


# ---------------------------------------------------------------- finding files


def test_resolve_by_name_path_and_file_name():
    by_name = resolve_hardware_path("edge-npu")
    assert by_name.name == "edge-npu.yaml"
    assert resolve_hardware_path("edge-npu.yaml").resolve() == by_name.resolve()
    assert resolve_hardware_path(by_name) == by_name


def test_a_config_in_the_working_directory_wins(tmp_path, monkeypatch):
    write(tmp_path, "hw_configs/edge-npu.yaml", "name: my-edge\ncores: {pe_rows: 8}\n")
    monkeypatch.chdir(tmp_path)
    hw = load_hardware("edge-npu")
    assert (hw.name, hw.cores.pe_rows) == ("my-edge", 8)


def test_an_unknown_name_lists_the_available_configs():
    message = error_of("edge-nup")
    assert "edge-nup" in message and "not found" in message
    for name in SHIPPED:
        assert name in message


def test_a_missing_path_is_an_error(tmp_path):
    message = error_of(tmp_path / "nope.yaml")
    assert "nope.yaml" in message and "not found" in message


def test_shipped_configs_are_packaged():
    # npusim/_builtin/hw_configs is what a wheel carries; in a checkout it points at hw_configs/.
    builtin = Path(npusim.__file__).resolve().parent / "_builtin" / "hw_configs"
    assert builtin.is_dir()
    for name in [*SHIPPED, "_base-npu"]:
        assert (builtin / f"{name}.yaml").is_file()
    assert builtin.resolve() in {folder.resolve() for folder in search_dirs("hw_configs")}


def test_unknown_resource_kind():
    with pytest.raises(ValueError, match="unknown resource kind"):
        find_resource("models", "x")


# ---------------------------------------------------------------- extends


def test_extends_deep_merges_blocks(tmp_path):
    write(tmp_path, "base.yaml", """\
        name: base
        description: the base
        scratchpad: {size: 1MiB, banks: 4, alignment: 128B}
        energy: {mac_int8: 0.5pJ, dram_read_byte: 64pJ}
        """)
    path = write(tmp_path, "child.yaml", """\
        extends: base
        scratchpad: {size: 256KiB}
        energy: {dram_read_byte: 31.2pJ}
        """)
    hw = load_hardware(path)
    assert hw.scratchpad.size == 256 * 1024
    assert (hw.scratchpad.banks, hw.scratchpad.alignment) == (4, 128)  # kept from the base
    assert (hw.energy.mac_int8, hw.energy.dram_read_byte) == (0.5, 31.2)
    assert hw.description == "the base"
    assert hw.name == "child"  # the name is not inherited


def test_extends_chains(tmp_path):
    write(tmp_path, "a.yaml", "cores: {pe_rows: 8, pe_cols: 8}\nstreams: 1\n")
    write(tmp_path, "b.yaml", "extends: a\ncores: {pe_cols: 16}\n")
    path = write(tmp_path, "c.yaml", "extends: b.yaml\nstreams: 3\n")
    hw = load_hardware(path)
    assert (hw.cores.pe_rows, hw.cores.pe_cols, hw.streams) == (8, 16, 3)


def test_extends_a_relative_path(tmp_path, monkeypatch):
    write(tmp_path, "variants/bases/local.yaml", "clock: 3GHz\n")
    assert load_hardware(write(tmp_path, "variants/x.yaml", "extends: bases/local.yaml\n")).clock == 3e9
    write(tmp_path, "bases/common.yaml", "clock: 2GHz\n")
    path = write(tmp_path, "variants/fast.yaml", "extends: ../bases/common.yaml\n")
    assert "outside the config's folder" in error_of(path)  # '..' leaves the config's folder
    monkeypatch.setenv("NPUSIM_HW_PATH", str(tmp_path / "bases"))  # unless a search path allows it
    assert load_hardware(path).clock == 2e9
    assert load_hardware(write(tmp_path, "variants/by-name.yaml", "extends: common\n")).clock == 2e9


@pytest.mark.parametrize("target", ["/etc/passwd", "../secret.yaml", "notes.txt", "link.yaml", "loop.yaml",
                                    '"a\\0b"', "/etc/no-such-file.yaml"])
def test_extends_reaches_only_yaml_files_in_allowed_folders(tmp_path, target):
    """Issue 21: `extends:` followed any path and quoted the file it found in its error."""
    secret = "root:x:0:0:SECRET-CONTENT"
    (tmp_path / "secret.yaml").write_text(f"- {secret}\n")
    write(tmp_path, "configs/notes.txt", f"{secret}\n")
    (tmp_path / "configs" / "link.yaml").symlink_to(tmp_path / "secret.yaml")  # a link out of the folder
    (tmp_path / "configs" / "loop.yaml").symlink_to(tmp_path / "configs" / "loop.yaml")
    message = error_of(write(tmp_path, "configs/x.yaml", f"extends: {target}\n"))
    assert "extends = " in message and "SECRET" not in message and "root:" not in message
    if target.startswith(("/", "..")):  # the same answer whether the file exists or not
        assert "outside the config's folder" in message


def test_a_base_that_is_not_a_mapping_is_not_quoted(tmp_path):
    write(tmp_path, "base.yaml", "- SECRET-CONTENT\n")
    message = error_of(write(tmp_path, "x.yaml", "extends: base\n"))
    assert "base.yaml: the top level is a list" in message and "SECRET" not in message


def test_extends_a_shipped_config_by_name(tmp_path):
    path = write(tmp_path, "edge-npu-256k.yaml", "extends: edge-npu\nscratchpad: {size: 256KiB}\n")
    hw = load_hardware(path)
    edge = load_hardware("edge-npu")
    assert hw.name == "edge-npu-256k"
    assert hw.scratchpad.size == 256 * 1024
    assert hw.with_scratchpad_size(edge.scratchpad.size).cores == edge.cores
    assert hw.dram == edge.dram and hw.energy == edge.energy


def test_extends_cycle_shows_the_chain(tmp_path):
    write(tmp_path, "a.yaml", "extends: b\n")
    write(tmp_path, "b.yaml", "extends: c\n")
    write(tmp_path, "c.yaml", "extends: a\n")
    message = error_of(tmp_path / "a.yaml")
    assert "cycle" in message
    chain = message[message.index("cycle"):]
    assert chain.index("a.yaml") < chain.index("b.yaml") < chain.index("c.yaml") < chain.rindex("a.yaml")


def test_a_file_extending_itself_is_a_cycle(tmp_path):
    path = write(tmp_path, "self.yaml", "extends: self\n")
    assert "cycle" in error_of(path)


def test_extends_a_missing_base(tmp_path):
    path = write(tmp_path, "x.yaml", "extends: no-such-base\n")
    message = error_of(path)
    assert "x.yaml" in message and "extends = 'no-such-base'" in message and "edge-npu" in message


@pytest.mark.parametrize("value", ["3", "''", "[a, b]"])
def test_extends_must_name_a_file(tmp_path, value):
    path = write(tmp_path, "x.yaml", f"extends: {value}\n")
    assert "extends = " in error_of(path)


def test_errors_name_the_file_that_set_the_bad_value(tmp_path):
    write(tmp_path, "base.yaml", "dma: {channels: 0}\n")
    path = write(tmp_path, "child.yaml", "extends: base\n")
    message = error_of(path)
    assert "base.yaml: dma.channels = 0" in message


# ---------------------------------------------------------------- validation


def test_unknown_key_suggests_the_closest(tmp_path):
    path = write(tmp_path, "x.yaml", "scratchpad: {sise: 1MiB}\n")
    message = error_of(path)
    assert "x.yaml" in message and "scratchpad.sise" in message
    assert "did you mean 'scratchpad.size'?" in message
    assert "size, banks, bytes_per_cycle, alignment" in message


def test_unknown_top_level_key_suggests_the_closest(tmp_path):
    path = write(tmp_path, "x.yaml", "clok: 1GHz\n")
    assert "did you mean 'clock'?" in error_of(path)


def test_a_key_in_the_wrong_block_suggests_where_it_belongs(tmp_path):
    path = write(tmp_path, "x.yaml", "pe_rows: 32\n")
    assert "did you mean 'cores.pe_rows'?" in error_of(path)


def test_unknown_key_without_a_close_match(tmp_path):
    path = write(tmp_path, "x.yaml", "dram: {zzzz: 1}\n")
    message = error_of(path)
    assert "unknown key dram.zzzz;" in message and "did you mean" not in message


def test_a_key_given_twice_is_an_error(tmp_path):
    path = write(tmp_path, "x.yaml", "scratchpad:\n  size: 1MiB\n  size: 2MiB\n")
    message = error_of(path)
    assert "x.yaml" in message and "line 3" in message and "'size' is given twice" in message


def test_bad_unit_message_names_file_key_value_and_expectation(tmp_path):
    path = write(tmp_path, "x.yaml", "scratchpad: {size: 1 MB/s}\n")
    message = error_of(path)
    assert f"{path}: scratchpad.size = '1 MB/s': unknown size unit 'MB/s'" in message
    assert "expected one of B, KB" in message


def test_wrong_case_unit_is_hinted(tmp_path):
    path = write(tmp_path, "x.yaml", "scratchpad: {size: 512kib}\n")
    assert "did you mean 'KiB'?" in error_of(path)


@pytest.mark.parametrize(
    ("yaml_text", "key", "expected"),
    [
        ("cores: {count: '2'}", "cores.count = '2'", "an integer such as 16"),
        ("cores: {pe_rows: 2.5}", "cores.pe_rows = 2.5", "an integer such as 16"),
        ("cores: {pe_cols: true}", "cores.pe_cols = True", "an integer such as 16"),
        ("cores: {dataflow: OS}", "cores.dataflow = 'OS'", "did you mean 'os'?"),
        ("cores: {dataflow: rs}", "cores.dataflow = 'rs'", "expected one of os, ws, is"),
        ("name: 123", "name = 123", "expected text"),
        ("clock: fast", "clock = 'fast'", "such as '1GHz'"),
        ("scratchpad: {size: yes}", "scratchpad.size = True", "boolean"),
        ("dram: {latency: .nan}", "dram.latency = nan", "finite"),
        ("dram: {bandwidth: [1, 2]}", "dram.bandwidth = [1, 2]", "such as '25.6GB/s'"),
    ],
)
def test_wrong_types(tmp_path, yaml_text, key, expected):
    path = write(tmp_path, "x.yaml", yaml_text + "\n")
    message = error_of(path)
    assert f"x.yaml: {key}: " in message and expected in message


@pytest.mark.parametrize(
    ("yaml_text", "key"),
    [
        ("scratchpad: {size: 0}", "scratchpad.size = 0"),
        ("scratchpad: {size: -1KiB}", "scratchpad.size = '-1KiB'"),
        ("dram: {capacity: 0B}", "dram.capacity = '0B'"),
        ("cores: {count: 0}", "cores.count = 0"),
        ("streams: -1", "streams = -1"),
        ("scratchpad: {banks: 0}", "scratchpad.banks = 0"),
        ("clock: 0Hz", "clock = '0Hz'"),
        ("dram: {bandwidth: 0}", "dram.bandwidth = 0"),
    ],
)
def test_zero_or_negative_is_rejected_where_it_makes_no_sense(tmp_path, yaml_text, key):
    path = write(tmp_path, "x.yaml", yaml_text + "\n")
    message = error_of(path)
    assert f"{key}: " in message and "greater than 0" in message


@pytest.mark.parametrize(
    ("yaml_text", "key"),
    [
        ("energy: {mac_int8: -0.1pJ}", "energy.mac_int8 = '-0.1pJ'"),
        ("energy: {static_power: -1mW}", "energy.static_power = '-1mW'"),
        ("dram: {latency: -1ns}", "dram.latency = '-1ns'"),
        ("dma: {setup_cycles: -1}", "dma.setup_cycles = -1"),
    ],
)
def test_negative_energy_power_time_and_cycles_are_rejected(tmp_path, yaml_text, key):
    path = write(tmp_path, "x.yaml", yaml_text + "\n")
    message = error_of(path)
    assert f"{key}: " in message and "0 or more" in message


def test_zero_energy_latency_and_cycles_are_fine(tmp_path):
    path = write(tmp_path, "x.yaml", """\
        energy: {static_power: 0W, dma_descriptor: 0}
        dram: {latency: 0ns}
        dma: {setup_cycles: 0, chunk_cycles: 0}
        """)
    hw = load_hardware(path)
    assert (hw.energy.static_power, hw.dram.latency, hw.dma.setup_cycles) == (0, 0, 0)


def test_alignment_must_be_a_power_of_two(tmp_path):
    path = write(tmp_path, "x.yaml", "scratchpad: {alignment: 48B}\n")
    message = error_of(path)
    assert "x.yaml: scratchpad.alignment = '48B': expected a power of two" in message


def test_alignment_must_fit_the_scratchpad(tmp_path):
    path = write(tmp_path, "x.yaml", "scratchpad: {size: 1KiB, alignment: 2KiB}\n")
    message = error_of(path)
    assert "scratchpad.alignment = '2KiB'" in message and "larger than scratchpad.size" in message


def test_a_small_scratchpad_override_is_checked_against_the_inherited_alignment(tmp_path):
    write(tmp_path, "base.yaml", "scratchpad: {alignment: 256B}\n")
    path = write(tmp_path, "child.yaml", "extends: base\nscratchpad: {size: 128B}\n")
    message = error_of(path)
    assert "base.yaml (extended by " in message and "child.yaml): scratchpad.alignment = '256B'" in message
    assert "128 B" in message


def test_burst_bytes_must_be_a_power_of_two(tmp_path):
    path = write(tmp_path, "x.yaml", "dma: {burst_bytes: 96}\n")
    assert "x.yaml: dma.burst_bytes = 96: expected a power of two" in error_of(path)


# ---------------------------------------------------------------- malformed files


def test_yaml_syntax_error_gives_the_line(tmp_path):
    path = write(tmp_path, "x.yaml", "clock: 1GHz\nscratchpad:\n  size: [1MiB\n  banks: 2\n")
    message = error_of(path)
    assert "x.yaml" in message and "invalid YAML" in message and "line " in message


def test_tab_indentation_is_a_syntax_error(tmp_path):
    path = write(tmp_path, "x.yaml", "scratchpad:\n\tsize: 1MiB\n")
    assert "invalid YAML" in error_of(path)


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "---\n"])
def test_empty_file(tmp_path, text):
    path = write(tmp_path, "x.yaml", text)
    message = error_of(path)
    assert "x.yaml" in message and "empty" in message


@pytest.mark.parametrize(("text", "kind"), [("- a\n- b\n", "list"), ("just text\n", "str"), ("42\n", "int")])
def test_top_level_must_be_a_mapping(tmp_path, text, kind):
    message = error_of(write(tmp_path, "x.yaml", text))
    assert "x.yaml" in message and f"top level is a {kind}" in message and "expected a mapping" in message


@pytest.mark.parametrize("value", ["5", "1MiB", "[1, 2]"])
def test_a_block_must_be_a_mapping(tmp_path, value):
    message = error_of(write(tmp_path, "x.yaml", f"scratchpad: {value}\n"))
    assert "x.yaml: scratchpad = " in message and "expected a mapping of size, banks" in message


def test_an_empty_block_keeps_the_defaults(tmp_path):
    hw = load_hardware(write(tmp_path, "x.yaml", "scratchpad:\n  # size: 2MiB\ndram:\n"))
    assert hw.scratchpad == Hardware().scratchpad
    assert hw.name == "x"


def test_yaml_anchors_and_merge_keys_work(tmp_path):
    hw = load_hardware(write(tmp_path, "x.yaml", """\
        energy:
          <<: {mac_int8: 1pJ, mac_fp16: 2pJ}
          mac_int8: 3pJ
        """))
    assert (hw.energy.mac_int8, hw.energy.mac_fp16) == (3, 2)


def test_a_path_without_its_suffix(tmp_path):
    write(tmp_path, "configs/small.yaml", "cores: {pe_rows: 2}\n")
    assert load_hardware(tmp_path / "configs" / "small").cores.pe_rows == 2


def test_non_string_keys_are_unknown(tmp_path):
    message = error_of(write(tmp_path, "x.yaml", "1: 2\n"))
    assert "unknown key 1" in message


# ---------------------------------------------------------------- overrides, dicts, docs


def test_overrides_apply_last_and_are_validated():
    hw = load_hardware("edge-npu", overrides={"scratchpad.size": "256KiB", "cores.dataflow": "ws"})
    assert (hw.scratchpad.size, hw.cores.dataflow) == (256 * 1024, "ws")
    assert "overrides: scratchpad.size = 'big'" in error_of("edge-npu", overrides={"scratchpad.size": "big"})
    assert "did you mean 'scratchpad.size'?" in error_of("edge-npu", overrides={"scratchpad.sizes": 1})


def test_override_strings_are_read_as_yaml_values():
    # `--set cores.count=2` arrives as the string "2"; a YAML file would have given the int 2.
    hw = load_hardware("edge-npu", overrides={"cores.count": "2", "streams": "2", "clock": "1GHz"})
    assert (hw.cores.count, hw.streams, hw.clock) == (2, 2, 1e9)
    assert "overrides: cores.count = 'two'" in error_of("edge-npu", overrides={"cores.count": "two"})


@pytest.mark.parametrize("name", SHIPPED)
def test_hardware_to_dict_is_plain_and_round_trips(name):
    hw = load_hardware(name)
    as_dict = hardware_to_dict(hw)
    assert json.loads(json.dumps(as_dict)) == as_dict
    assert as_dict["scratchpad"]["size"] == hw.scratchpad.size
    assert hardware_from_mapping(as_dict) == hw  # base units are valid input too


def test_every_field_has_a_quantity_and_a_doc():
    for dotted, field in iter_knobs():
        assert field.metadata.get("quantity"), dotted
        assert field.metadata.get("doc"), dotted


def test_documented_defaults_parse_back_to_the_defaults():
    defaults = hardware_to_dict(Hardware())
    for dotted, field in iter_knobs():
        quantity = field.metadata["quantity"]
        if quantity in ("int", "str", "choice", "bool", "unroll", "dims", "operands", "levels"):
            continue  # no unit to parse back (lists and mappings: tests/test_zigzag.py)
        value = defaults
        for part in dotted.split("."):
            value = value[part]
        if value is None:  # derived from the components (npusim.hw.silicon)
            assert format_quantity(value, quantity) == "derived", dotted
            continue
        assert parse(format_quantity(value, quantity), quantity) == pytest.approx(value), dotted


def test_readme_field_reference_is_current():
    readme = (REPO / "hw_configs" / "README.md").read_text(encoding="utf-8")
    assert generated_section(readme) == hardware_reference_markdown().strip("\n"), (
        "hw_configs/README.md is stale: run `python -m npusim.hw.docs`")


def test_readme_documents_every_field():
    readme = (REPO / "hw_configs" / "README.md").read_text(encoding="utf-8")
    for dotted, _ in iter_knobs():
        assert f"`{dotted}`" in readme, dotted


@pytest.mark.parametrize(("key", "value"), [("dma.burst_bytes", 2**64), ("scratchpad.size", "1e286B")])
def test_sizes_no_memory_has_are_refused_before_they_overflow(key, value):
    """Found by the CLI fuzz: a 2^64-byte burst overflowed the burst-count kernel, a 1e286-byte
    scratchpad the SRAM table's power law (both exit 3 before)."""
    with pytest.raises(ConfigError, match=rf"{key} = .*expected at most"):
        load_hardware("edge-npu", overrides={key: value})


@pytest.mark.parametrize(("key", "value"), [
    ("dram.latency", "1e300s"), ("energy.uncore_static_power", "1e308W"), ("energy.mac_int8", "1e305pJ"),
    ("energy.scratchpad_read_byte", "1.4e305pJ"), ("clock", "1e300GHz"), ("dma.setup_cycles", 1e300),
    ("dram.bandwidth", "1e300GB/s"), ("area.pe", "1e300mm2"),
])
def test_values_whose_figures_would_overflow_are_refused(key, value):
    """The issue's reproductions (a report of inf with exit 0) and the fuzz's: every quantity has
    a largest value far beyond any hardware (``QUANTITY_MAXIMUM``), so no product a simulation
    forms overflows; one whose unit already overflows a float (1e300 GHz in Hz) is refused as such."""
    with pytest.raises(ConfigError, match=rf"{key} = .*(expected at most|overflows in the base unit)"):
        load_hardware("edge-npu", overrides={key: value})


def test_a_simulation_whose_figures_overflow_is_a_user_error(monkeypatch):
    from npusim import workflow

    graph, hw = workflow.load_graph("squeezenet1_0"), load_hardware("edge-npu")
    plan = workflow.plan_graph(graph, hw)
    real = workflow.simulate
    monkeypatch.setattr(workflow, "simulate", lambda *a, **k: dataclasses.replace(real(*a, **k), cycles=float("inf")))
    with pytest.raises(NpusimError, match="overflow"):
        workflow.simulate_plan(plan, hw)


@pytest.mark.parametrize("dram, field", [("{model: bandwidth, mapping: foo}", "dram.mapping = 'foo'"),
                                         ("{model: bandwidth, channels: 3}", "dram.channels = 3")])
def test_a_dram_field_wrong_on_its_own_is_refused_whatever_the_model(tmp_path, dram, field):
    """A mapping that is not one and a channel count that is no power of two cannot be right
    for any part: a bandwidth-model config with them simulated with no word (and passed
    ``doctor``); the banks model refused them. Refused for every model (a user audit)."""
    import re

    from npusim.workflow import load_hw

    path = tmp_path / "odd.yaml"
    path.write_text(f"extends: edge-npu\nname: odd\ndram: {dram}\n")
    with pytest.raises(ConfigError, match=re.escape(f"odd.yaml: {field}")):
        load_hw(str(path))


def test_a_command_line_number_with_leading_zeros_is_decimal():
    """``--set dram.channels=010`` ran 8 channels (YAML 1.1 reads 010 as octal) with no word (a
    fuzzing audit); on a command line it is ten."""
    from npusim.workflow import load_hw

    assert load_hw("edge-npu", {"dram.channels": "004"}).dram.channels == 4
    with pytest.raises(ConfigError, match="dram.channels = 10: expected a power of two"):
        load_hw("edge-npu", {"dram.channels": "010"})


def test_a_huge_value_is_named_in_a_short_line(tmp_path):
    """A 5,001-digit bandwidth was echoed whole after 'got': a 5,178-character 'one line' (a
    fuzzing audit). The message names the field and elides the value's middle."""
    from npusim.workflow import load_hw

    path = tmp_path / "big.yaml"
    path.write_text("extends: edge-npu\nname: big\ndram:\n  bandwidth: 1" + "0" * 5000 + " B/s\n")
    with pytest.raises(ConfigError) as error:
        load_hw(str(path))
    message = str(error.value)
    assert "dram.bandwidth" in message and "finite" in message and len(message) < 400 and "\n" not in message


def test_an_integer_past_pythons_digit_limit_is_not_answered_with_python_advice(tmp_path):
    """A 5,001-digit integer in a config answered 'use sys.set_int_max_str_digits()' (a fuzzing audit)."""
    from npusim.workflow import load_hw

    path = tmp_path / "big.yaml"
    path.write_text("extends: edge-npu\nname: big\ndram:\n  channels: 1" + "0" * 5000 + "\n")
    with pytest.raises(ConfigError, match="big.yaml: invalid YAML value: an integer of more than 4,300 digits") as error:
        load_hw(str(path))
    assert "sys." not in str(error.value)


def test_a_clash_made_on_the_command_line_names_the_value_given_there():
    """``--set scratchpad.size=63B`` was answered 'hw_configs/edge-npu.yaml: scratchpad.alignment
    = 64B: larger than ...', blaming the file for the user's override (a fuzzing audit)."""
    from npusim.workflow import load_hw

    with pytest.raises(ConfigError, match=r"^overrides: scratchpad.size = '63B': smaller than scratchpad.alignment"):
        load_hw("edge-npu", {"scratchpad.size": "63B"})
    with pytest.raises(ConfigError, match=r"^overrides: scratchpad.alignment = '2MiB': larger than scratchpad.size"):
        load_hw("edge-npu", {"scratchpad.alignment": "2MiB"})


def test_an_unknown_dram_field_is_not_sent_to_another_block():
    """``--set dram.ranks=2`` suggested 'scratchpad.banks' (a fuzzing audit): a key of another
    block is suggested only when its name is nearly the same."""
    from npusim.workflow import load_hw

    with pytest.raises(ConfigError) as error:
        load_hw("edge-npu", {"dram.ranks": "2"})
    assert "unknown key dram.ranks" in str(error.value) and "scratchpad.banks" not in str(error.value)
