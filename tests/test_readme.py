"""Every command the README shows runs, in the README's order, in a scratch folder: each
``npusim`` line of its ``sh`` blocks exits 0, each ``$ npusim`` example of an error prints the
error shown, and the Python block runs. (The install lines are what CI itself runs.)"""

from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path

import pytest

from npusim.cli import main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    """The fenced blocks of ``language`` ("" for plain fences), in order."""
    found, current, fence = [], [], None
    for line in README.splitlines():
        if line.startswith("```"):
            if fence is None:
                fence, current = line[3:].strip(), []
            else:
                if fence == language:
                    found.append("\n".join(current) + "\n")
                fence = None
        elif fence is not None:
            current.append(line)
    return found


def commands() -> list[list[str]]:
    """The npusim command lines of the sh blocks (comments dropped, continuations joined)."""
    found = []
    for block in blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" # ")[0].strip()
            if ".venv/bin/npusim " in line:
                line = "npusim " + line.split(".venv/bin/npusim ", 1)[1]
            if line.startswith("npusim "):
                found.append(shlex.split(line)[1:])
    return found


def error_examples() -> list[tuple[list[str], str]]:
    """(arguments, the error line up to its first "(...)") of the ``$ npusim`` examples."""
    found = []
    for block in blocks(""):
        lines = block.splitlines()
        for n, line in enumerate(lines[:-1]):
            if line.startswith("$ npusim ") and lines[n + 1].startswith("npusim: error:"):
                found.append((shlex.split(line[2:])[1:], lines[n + 1].split("(...)")[0]))
    return found


def test_the_readme_has_the_commands_of_its_three_uses():
    verbs = {argv[0] for argv in commands()}
    assert {"simulate", "plan", "validate", "plot-plan", "dse", "compare", "regress", "doctor"} <= verbs
    assert error_examples(), "the quick start shows what a refused pipeline says"


def test_every_readme_command_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for argv in commands():
        assert main(argv) == 0, f"npusim {shlex.join(argv)}: {capsys.readouterr().err}"
        capsys.readouterr()
    for argv, expected in error_examples():
        assert main(argv) == 2, f"npusim {shlex.join(argv)}"
        assert capsys.readouterr().err.startswith(expected)


def test_the_readme_python_example_runs(capsys):
    (source,) = blocks("python")
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(source, "README.md", "exec"), {})
    assert "latency" in out.getvalue()


@pytest.mark.parametrize("limit", [250])
def test_the_readme_is_a_guide_not_a_manual(limit):
    assert len(README.splitlines()) <= limit, "move reference material to docs/"


def test_the_quick_start_prints_what_the_readme_shows(capsys):
    """The README's quick-start output, digit for digit (the wall-time line aside: it is the
    machine's)."""
    (shown,) = [b for b in blocks("") if b.startswith("resnet50@fused@tiled on edge-npu")]
    argv = next(a for a in commands() if a[:2] == ["simulate", "resnet50"])
    assert main(argv) == 0
    printed = capsys.readouterr().out
    keep = lambda text: [line.rstrip() for line in text.splitlines() if not line.lstrip().startswith("wall time")]  # noqa: E731
    assert keep(printed) == keep(shown)

