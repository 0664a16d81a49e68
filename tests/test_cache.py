"""A DSE cache that cannot lie (issue 21, item 4).

Each way an entry can be wrong -- edited, malformed, a symlink (to a file outside, to
/dev/zero), a FIFO, another key's entry, written by other code -- is detected: the point is
computed again, with one warning line, and the result files are those of a fresh run.
"""

from __future__ import annotations

import json
from pathlib import Path
import os
import threading

import pytest

from helpers import chain_with_skip
from npusim.dse import fingerprint as fingerprint_module
from npusim import dse
from npusim.cli import main
from npusim.graph.trace_io import save_trace
from npusim.dse.cache import MAX_ENTRY_BYTES, SECRET_NAME, Cache, row_checksum, row_mac


@pytest.fixture()
def setup(chain_trace, tmp_path):
    """One point, computed once into a fresh cache: (points, cache folder, entry path, fresh rows)."""
    cache = tmp_path / "cache"
    points = dse.make_points([chain_trace], "edge-npu", [dse.parse_sweep("budget=3KiB")], ["default+arena+belady"])
    fresh = dse.run_sweep(points, cache_dir=cache)
    entry = Cache(cache).path(points[0].cache_key())
    assert fresh.computed == 1 and entry.is_file()
    return points, cache, entry, fresh.rows


def same(rows, expected) -> bool:
    """Equal rows, wall-clock solve times aside (a recomputed point is timed again)."""
    return dse.without_wall_clock(rows) == dse.without_wall_clock(expected)


def rerun(points, cache):
    return dse.run_sweep(points, cache_dir=cache)


def test_a_clean_entry_is_used(setup):
    points, cache, _, rows = setup
    again = rerun(points, cache)
    assert (again.computed, again.cached) == (0, 1) and again.rows == rows  # solve time included


def test_a_planted_edit_is_detected(setup, capsys):
    points, cache, entry, rows = setup
    data = json.loads(entry.read_text())
    data["row"]["cycles"] = 1.0  # the number a poisoned entry would slip into the CSV
    entry.write_text(json.dumps(data))
    again = rerun(points, cache)
    err = capsys.readouterr().err
    assert again.computed == 1 and again.rows[0]["cycles"] == rows[0]["cycles"] != 1.0
    assert err.count("\n") == 1 and "HMAC mismatch" in err and str(entry) in err


def test_an_edit_with_a_recomputed_checksum_for_another_key_is_detected(setup, capsys):
    points, cache, entry, rows = setup
    data = json.loads(entry.read_text())
    data["key"] = "0" * 64
    data["row"]["cycles"] = 1.0
    data["hmac"] = row_mac((cache / SECRET_NAME).read_bytes(), data["key"], data["row"])
    entry.write_text(json.dumps(data))
    again = rerun(points, cache)
    assert again.computed == 1 and same(again.rows, rows) and "another key" in capsys.readouterr().err


def test_a_forged_row_with_a_valid_checksum_but_other_columns_is_refused(setup, capsys):
    points, cache, entry, rows = setup
    data = json.loads(entry.read_text())
    del data["row"]["status"]  # a row summary() could not print
    data["hmac"] = row_mac((cache / SECRET_NAME).read_bytes(), data["key"], data["row"])
    entry.write_text(json.dumps(data))
    again = rerun(points, cache)
    assert again.computed == 1 and same(again.rows, rows) and "columns" in capsys.readouterr().err


def test_a_forged_entry_with_a_recomputed_plain_checksum_is_recomputed(setup, capsys):
    """The forgery of the issue: edit the row, recompute sha256(key, row) -- which anyone can --
    and put it where the authentication goes. Without the cache's secret it is not reused."""
    points, cache, entry, rows = setup
    data = json.loads(entry.read_text())
    data["row"]["cycles"] = 1.0
    data["hmac"] = data["checksum"] = row_checksum(data["key"], data["row"])
    entry.write_text(json.dumps(data))
    again = rerun(points, cache)
    err = capsys.readouterr().err
    assert again.computed == 1 and again.rows[0]["cycles"] == rows[0]["cycles"] != 1.0
    assert err.count("\n") == 1 and "HMAC mismatch" in err and "warning" in err


def test_a_non_finite_row_is_never_reused_even_when_authenticated(setup, capsys):
    points, cache, entry, rows = setup
    data = json.loads(entry.read_text())
    data["row"]["energy_uj"] = float("nan")
    data["hmac"] = row_mac((cache / SECRET_NAME).read_bytes(), data["key"], data["row"])
    entry.write_text(json.dumps(data))
    again = rerun(points, cache)
    assert again.computed == 1 and same(again.rows, rows) and "NaN" in capsys.readouterr().err


def test_the_secret_is_owner_only_and_a_shared_one_is_not_trusted(setup, capsys):
    import stat

    points, cache, entry, rows = setup
    secret = cache / SECRET_NAME
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and len(secret.read_bytes()) == 32
    secret.chmod(0o644)
    again = rerun(points, cache)
    err = capsys.readouterr().err
    assert again.computed == 1 and same(again.rows, rows) and "readable or writable by others" in err
    secret.unlink()  # a new secret: every entry made under the old one is recomputed, with a warning
    again = rerun(points, cache)
    assert again.computed == 1 and "HMAC mismatch" in capsys.readouterr().err
    assert rerun(points, cache).cached == 1


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"format": "npusim-dse-point/1", "row": {}}', "", "9" * 5000])
def test_a_malformed_entry_is_recomputed_not_a_crash(setup, capsys, text):
    points, cache, entry, rows = setup
    entry.write_text(text)
    again = rerun(points, cache)
    err = capsys.readouterr().err
    assert again.computed == 1 and same(again.rows, rows) and err.count("\n") == 1 and "warning" in err
    assert same([json.loads(entry.read_text())["row"]], rows)  # and the entry is whole again


def test_a_symlink_to_a_file_outside_is_neither_read_nor_written(setup, capsys, tmp_path):
    points, cache, entry, rows = setup
    outside = tmp_path / "outside.json"
    outside.write_text(entry.read_text())  # a valid entry, even: a link is refused as such
    before = outside.read_text()
    entry.unlink()
    entry.symlink_to(outside)
    again = rerun(points, cache)
    assert again.computed == 1 and same(again.rows, rows) and "symlink" in capsys.readouterr().err
    assert outside.read_text() == before  # not written through the link
    assert not entry.is_symlink() and entry.is_file()  # the link itself was replaced
    mask = os.umask(0)
    os.umask(mask)
    assert entry.stat().st_mode & 0o777 == 0o666 & ~mask  # a file with the usual mode, not the link's 0777


def test_a_symlink_to_dev_zero_is_refused(setup, capsys):
    points, cache, entry, rows = setup
    entry.unlink()
    entry.symlink_to("/dev/zero")
    again = rerun(points, cache)
    assert again.computed == 1 and same(again.rows, rows) and "symlink" in capsys.readouterr().err


def test_special_and_huge_files_are_refused_without_reading_them(setup, capsys):
    points, cache, entry, rows = setup
    entry.unlink()
    os.mkfifo(entry)  # opening a FIFO for reading would block without O_NONBLOCK
    watchdog = threading.Timer(60, os._exit, args=(99,))  # a hang fails the run instead of blocking it
    watchdog.start()
    try:
        again = rerun(points, cache)
    finally:
        watchdog.cancel()
    assert again.computed == 1 and same(again.rows, rows) and "not a regular file" in capsys.readouterr().err
    with open(entry, "wb") as f:
        f.truncate(MAX_ENTRY_BYTES + 1)
    again = rerun(points, cache)
    assert again.computed == 1 and "more than an entry's" in capsys.readouterr().err


def test_a_planted_tmp_symlink_is_not_followed(setup, tmp_path):
    """The old cache wrote `<key>.tmp` and renamed it; the temporary name is now unpredictable."""
    points, cache, entry, _ = setup
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    entry.unlink()
    entry.with_suffix(".tmp").symlink_to(victim)
    rerun(points, cache)
    assert victim.read_text() == "keep me" and entry.is_file() and not entry.is_symlink()


def test_a_symlinked_subfolder_is_refused(setup, capsys, tmp_path):
    points, cache, entry, rows = setup
    elsewhere = tmp_path / "elsewhere"
    entry.parent.rename(elsewhere)
    entry.parent.symlink_to(elsewhere)
    again = rerun(points, cache)
    assert again.computed == 1 and same(again.rows, rows) and "not a folder" in capsys.readouterr().err


def test_a_code_change_is_a_different_key(setup, monkeypatch):
    points, cache, _, rows = setup
    monkeypatch.setattr(dse, "code_fingerprint", lambda: "a planner was edited")
    changed = dse.make_points([points[0].trace], "edge-npu", [dse.parse_sweep("budget=3KiB")], ["default+arena+belady"])
    assert changed[0].cache_key() != points[0].cache_key()
    again = rerun(changed, cache)
    assert (again.computed, again.cached) == (1, 0) and same(again.rows, rows)


def test_a_worker_with_other_code_refuses(setup):
    from dataclasses import replace

    points, *_ = setup
    with pytest.raises(dse.DseError, match="other planner or simulator code"):
        dse.evaluate_point(replace(points[0], code="0" * 64))


def test_an_edit_to_the_cacti_table_or_a_plugin_source_changes_the_fingerprint(tmp_path, monkeypatch):
    """Package data and plugin sources are hashed from their files: an edited CACTI table, or a
    plugin edited without a version bump, makes a new fingerprint, hence new keys (rows are
    computed again, as test_a_code_change_is_a_different_key shows)."""
    import shutil
    import sys

    package = Path(fingerprint_module.__file__).parents[1]
    files = fingerprint_module.hashed_files(package)
    assert "hw/data/sram_cacti7_45nm.csv" in files and "schemas/trace.schema.json" in files
    copy = tmp_path / "npusim"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("_builtin", "__pycache__"))
    before = fingerprint_module.tree_digest(copy)
    table = copy / "hw" / "data" / "sram_cacti7_45nm.csv"
    table.write_text(table.read_text().replace("1", "2", 1))
    assert fingerprint_module.tree_digest(copy) != before
    (tmp_path / "my_plugin.py").write_text("def register(registry):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = fingerprint_module.module_digest("my_plugin")
    (tmp_path / "my_plugin.py").write_text("def register(registry):\n    return None\n")
    sys.modules.pop("my_plugin", None)
    assert fingerprint_module.module_digest("my_plugin") != first != "(not found)"


def test_a_plugins_helper_module_counts_in_the_fingerprint(tmp_path, monkeypatch):
    """An entry point ``audpkg.entry:register`` whose planner lives in ``audpkg/heur.py``: an
    edit to heur.py reused the cached rows (only entry.py was hashed: an API audit). Its whole
    top-level package is hashed now."""
    import importlib.metadata

    package = tmp_path / "audpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "entry.py").write_text("from audpkg.heur import order\n\ndef register(registry):\n    pass\n")
    (package / "heur.py").write_text("def order(ops):\n    return sorted(ops)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    point = importlib.metadata.EntryPoint("aud", "audpkg.entry:register", fingerprint_module.PLUGIN_GROUP)
    monkeypatch.setattr(fingerprint_module.importlib.metadata, "entry_points", lambda group: [point])
    before = fingerprint_module.plugin_versions()
    assert len(before) == 1 and before[0].startswith("plugin aud = audpkg.entry:register") and "(not" not in before[0]
    (package / "heur.py").write_text("def order(ops):\n    return sorted(ops, reverse=True)\n")
    assert fingerprint_module.plugin_versions() != before


def test_the_fingerprint_covers_package_files_and_plugins(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("X = 1\n")
    before = fingerprint_module.tree_digest(tmp_path / "pkg")
    (tmp_path / "pkg" / "a.py").write_text("X = 2\n")
    assert fingerprint_module.tree_digest(tmp_path / "pkg") != before
    assert any(line.startswith("plugin builtin = planners:register from npusim ") and " files " in line
               for line in fingerprint_module.plugin_versions())
    # A plugin's new version changes the fingerprint.
    original = fingerprint_module.code_fingerprint()
    real_plugins = fingerprint_module.plugin_versions()
    monkeypatch.setattr(fingerprint_module, "plugin_versions", lambda: [*real_plugins, "plugin extra = x:y from extra 2.0"])
    fingerprint_module.code_fingerprint.cache_clear()
    try:
        patched = fingerprint_module.code_fingerprint()
    finally:
        fingerprint_module.code_fingerprint.cache_clear()
    assert patched != original


def test_cached_rows_give_byte_identical_outputs(chain_trace, tmp_path, capsys):
    """Fresh, then from the cache: the CSV and JSON bytes match (key order included)."""
    argv = ["dse", chain_trace, "--hw", "edge-npu", "--sweep", "budget=1KiB,3KiB", "--planner",
            "default+arena+belady,rpo+arena+lru", "--cache-dir", str(tmp_path / "cache")]
    assert main([*argv, "-o", str(tmp_path / "fresh.csv")]) == 0
    assert main([*argv, "-o", str(tmp_path / "cached.csv")]) == 0
    assert "(4 cached, 0 computed" in capsys.readouterr().out
    for suffix in (".csv", ".json"):
        assert (tmp_path / f"fresh{suffix}").read_bytes() == (tmp_path / f"cached{suffix}").read_bytes()
    fresh_row = json.loads((tmp_path / "fresh.json").read_text())["rows"][-1]
    assert list(fresh_row) != sorted(fresh_row)  # the row keeps its column order, which sort_keys would lose
