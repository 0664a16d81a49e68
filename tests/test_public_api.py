"""The public face: ``from npusim import ...`` gives the flow's entry points, cheaply."""

import subprocess
import sys

import npusim


def test_every_public_name_resolves_to_its_definition():
    import importlib

    for name, module in npusim._PUBLIC.items():
        assert getattr(npusim, name) is getattr(importlib.import_module(module), name), name


def test_the_documented_flow_runs():
    from npusim import load_graph, load_hw, plan_graph, simulate_plan

    graph, hw = load_graph("squeezenet1_0"), load_hw("edge-npu")
    report = simulate_plan(plan_graph(graph, hw), hw, graph, validated=True)
    assert report.cycles > 0 and report.summary().startswith("squeezenet1_0")


def test_import_npusim_loads_no_heavy_dependency():
    code = "import sys, npusim; print(any(m in sys.modules for m in ('simpy', 'ortools', 'numba')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_command_runs_numpy_on_one_thread_unless_told_otherwise():
    """numpy's OpenBLAS starts a thread per core that spins ~0.1 s of CPU waiting for work; the
    ``npusim`` command has no use for it (npusim.cli). A user's own OPENBLAS_NUM_THREADS stays."""
    import os

    code = ("import os, npusim.cli, numpy; "
            "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split() == ["1", "1"]  # one thread: the interpreter's
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**env, "OPENBLAS_NUM_THREADS": "2"}).stdout
    assert out.split()[0] == "2"


def test_an_unknown_name_is_an_attribute_error():
    try:
        npusim.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
