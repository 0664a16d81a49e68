"""Outputs whole or absent, and a clean end on full disks and closed pipes (issue 21, item 3).

Every writer goes through ``npusim.util.atomic_io``: a failure (a full disk here, simulated by
making the write or the fsync raise ENOSPC) leaves the previous file byte-identical, leaves
no temporary file behind, and the command ends with one line naming the file and exit 2.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import chain_with_skip
from npusim.util import atomic_io
from npusim.util.atomic_io import OutputError, atomic_open, atomic_write_text
from npusim.cli import main
from npusim.graph.trace_io import save_trace

OLD = "the previous content\n"


@pytest.fixture()
def full_disk(monkeypatch):
    """Every atomic write fails with ENOSPC after its first byte reaches the temporary file."""
    real_fdopen = os.fdopen

    class FullFile:
        def __init__(self, handle):
            self._handle = handle

        def write(self, data):
            self._handle.write(data[:1])  # a torn write, as a real full disk gives
            self._handle.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self._handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self._handle.__exit__(*exc)

    monkeypatch.setattr(atomic_io.os, "fdopen", lambda *a, **k: FullFile(real_fdopen(*a, **k)))


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# ---------------------------------------------------------------- the helper


def test_a_write_replaces_the_file_whole(tmp_path):
    target = tmp_path / "out.json"
    target.write_text(OLD)
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n" and leftovers(tmp_path) == []


def test_an_error_in_the_block_leaves_the_previous_file(tmp_path):
    target = tmp_path / "out.json"
    target.write_text(OLD)
    with pytest.raises(RuntimeError):
        with atomic_open(target) as handle:
            handle.write("half of it")
            raise RuntimeError("the caller failed half-way")
    assert target.read_text() == OLD and leftovers(tmp_path) == []


def test_a_full_disk_is_one_user_error_naming_the_file(tmp_path, full_disk):
    target = tmp_path / "out.json"
    target.write_text(OLD)
    with pytest.raises(OutputError, match=r"out\.json: cannot write: No space left on device \(the previous file"):
        atomic_write_text(target, "x" * 100_000)
    assert target.read_text() == OLD and leftovers(tmp_path) == []


def test_a_failing_fsync_leaves_the_previous_file(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text(OLD)

    def fsync(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(atomic_io.os, "fsync", fsync)
    with pytest.raises(OutputError, match="Input/output error"):
        atomic_write_text(target, "new")
    assert target.read_text() == OLD and leftovers(tmp_path) == []


def test_new_files_get_the_usual_permissions_and_symlinks_are_followed(tmp_path):
    real = tmp_path / "real.json"
    real.write_text(OLD)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"  # the file pointed at is replaced, the link stays
    fresh = tmp_path / "fresh.json"
    atomic_write_text(fresh, "x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~mask


def test_devices_are_written_in_place_and_dev_full_fails_cleanly():
    atomic_write_text(os.devnull, "discarded")  # not renamed over: /dev/null stays a device
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with pytest.raises(OutputError, match="/dev/full: cannot write: No space left on device"):
        atomic_write_text("/dev/full", "x" * 100_000)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(OutputError, match="is a folder"):
        atomic_write_text(tmp_path, "x")


# ---------------------------------------------------------------- through the command line


def test_plan_on_a_full_disk_keeps_the_old_plan(capsys, chain_trace, tmp_path, full_disk):
    out = tmp_path / "plan.json"
    out.write_text(OLD)
    code = main(["plan", chain_trace, "--hw", "edge-npu", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"{out}: cannot write: No space left on device" in err
    assert out.read_text() == OLD and leftovers(tmp_path) == []


@pytest.mark.parametrize("flag", ["--report", "--timeline"])
def test_simulate_outputs_on_a_full_disk(capsys, chain_trace, tmp_path, full_disk, flag):
    out = tmp_path / "out.json"
    out.write_text(OLD)
    code = main(["simulate", chain_trace, "--hw", "edge-npu", flag, str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "No space left on device" in err
    assert out.read_text() == OLD


def test_dse_results_on_a_full_disk(capsys, chain_trace, tmp_path, full_disk):
    out = tmp_path / "r.csv"
    out.write_text(OLD)
    code = main(["dse", chain_trace, "--hw", "edge-npu", "--sweep", "budget=3KiB", "--no-cache", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "r.csv: cannot write" in err
    assert out.read_text() == OLD and not out.with_suffix(".json").exists()


def test_import_and_compare_outputs_go_through_the_helper(capsys, chain_trace, tmp_path, full_disk):
    out = tmp_path / "table.csv"
    code = main(["compare", chain_trace, "--hw", "edge-npu", "--planner", "default+arena+belady",
                 "--format", "csv", "-o", str(out)])
    assert code == 2 and "table.csv: cannot write" in capsys.readouterr().err and not out.exists()
    trace = tmp_path / "copy.json.gz"
    with pytest.raises(OutputError):
        save_trace(chain_with_skip(), trace)
    assert not trace.exists() and leftovers(tmp_path) == []


def run_cli(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "npusim.cli", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=300, cwd=Path(__file__).resolve().parents[1])


def test_dev_full_as_output_and_as_stdout_is_one_line():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    done = run_cli("plan", "resnet18", "--hw", "edge-npu", "-o", "/dev/full")
    assert done.returncode == 2 and done.stderr == "npusim: error: /dev/full: cannot write: No space left on device\n"
    with open("/dev/full", "w") as full:
        done = run_cli("list", stdout=full)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "No space left on device" in done.stderr


@pytest.mark.parametrize("args", [["list"], ["simulate", "resnet18", "--hw", "edge-npu", "--json"]])
def test_a_closed_pipe_ends_quietly(args):
    """`npusim ... | head -1`: the reader goes away after one line; no traceback, exit 0."""
    shell = f"{sys.executable} -m npusim.cli {' '.join(args)} | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}"
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.stderr == "" and done.stdout.strip() == "0"


# ---------------------------------------------------------------- environment and local folders


@pytest.mark.parametrize("value", ["abc", "nan", "inf", "-5", "0"])
def test_a_bad_environment_knob_is_one_line_naming_it(capsys, monkeypatch, value):
    monkeypatch.setenv("NPUSIM_SIM_MAX_SECONDS", value)
    assert main(["list"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"NPUSIM_SIM_MAX_SECONDS={value!r}" in err and "positive" in err


def test_the_simulator_reads_the_knob_when_it_runs(monkeypatch, chain_trace):
    from npusim.errors import NpusimError
    from npusim.workflow import load_graph, load_hw, plan_graph, simulate_plan

    graph, hw = load_graph(chain_trace), load_hw("edge-npu")
    plan = plan_graph(graph, hw, "default+arena+belady", 4096)
    monkeypatch.setenv("NPUSIM_SIM_MAX_SECONDS", "nan")  # used to turn the guard off silently
    with pytest.raises(NpusimError, match="NPUSIM_SIM_MAX_SECONDS"):
        simulate_plan(plan, hw, graph)
    monkeypatch.setenv("NPUSIM_SIM_MAX_SECONDS", "120")
    assert simulate_plan(plan, hw, graph).cycles > 0


def test_a_missing_hw_path_folder_is_named(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("NPUSIM_HW_PATH", str(tmp_path / "nowhere"))
    assert main(["list"]) == 2
    assert "NPUSIM_HW_PATH" in capsys.readouterr().err


def test_a_local_traces_folder_that_shadows_a_shipped_trace_is_named(capsys, monkeypatch, tmp_path):
    from npusim.util import resources

    shipped = resources.find_resource("traces", "resnet18")
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "resnet18.json").write_bytes(shipped.read_bytes())
    (tmp_path / "traces" / "mine.json").write_bytes(shipped.read_bytes())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(resources, "_warned", set())
    assert resources.find_resource("traces", "mine") == tmp_path / "traces" / "mine.json"
    assert capsys.readouterr().err == ""  # a new name shadows nothing
    assert resources.find_resource("traces", "resnet18") == tmp_path / "traces" / "resnet18.json"
    assert resources.find_resource("traces", "resnet18.json") == tmp_path / "traces" / "resnet18.json"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "traces/resnet18.json in the working directory shadows" in err


def test_every_writer_goes_through_the_atomic_helper():
    """No module writes a file directly (write_text/write_bytes/open for writing/savefig to a
    path): a new writer that bypasses npusim.util.atomic_io fails here."""
    import ast

    root = Path(__file__).resolve().parents[1]
    offenders = []
    for path in sorted([*root.joinpath("npusim").rglob("*.py"), *root.joinpath("planners").rglob("*.py")]):
        if path.name == "atomic_io.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            mode = next((a.value for a in node.args[1:2] if isinstance(a, ast.Constant)), None)
            mode = next((k.value.value for k in node.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)),
                        mode)
            writes = (name in ("write_text", "write_bytes", "mkstemp", "NamedTemporaryFile")
                      or (name in ("open", "fdopen") and isinstance(mode, str) and any(c in mode for c in "wax+")))
            if writes:
                offenders.append(f"{path.relative_to(root)}:{node.lineno} {name}")
    assert offenders == []


def test_a_file_as_cache_folder_is_one_error(capsys, chain_trace, tmp_path):
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("x")
    code = main(["dse", chain_trace, "--hw", "edge-npu", "--sweep", "budget=3KiB", "--cache-dir", str(not_a_folder),
                 "-o", str(tmp_path / "r.csv")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--cache-dir" in err


def test_a_replaced_file_keeps_its_mode(tmp_path):
    target = tmp_path / "shared.json"
    target.write_text(OLD)
    target.chmod(0o640)
    atomic_write_text(target, "new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640 and target.read_text() == "new"
