"""The examples are regression tests: each runs as a user would run it and must print
exactly its checked-in ``examples/NAME.expected.txt``.

After an intended change, regenerate with ``python examples/NAME.py > examples/NAME.expected.txt``.
"""

import difflib
import subprocess
import sys

import pytest

from helpers import REPO

EXAMPLES = sorted(p.stem for p in (REPO / "examples").glob("*.py"))
NEEDS_MATPLOTLIB = {"sweep_and_plot"}


def test_every_example_has_an_expected_output():
    assert EXAMPLES, "no examples found"
    for name in EXAMPLES:
        assert (REPO / "examples" / f"{name}.expected.txt").is_file(), name


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_prints_its_expected_output(name):
    if name in NEEDS_MATPLOTLIB:
        pytest.importorskip("matplotlib")
    run = subprocess.run([sys.executable, f"examples/{name}.py"], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    expected = (REPO / "examples" / f"{name}.expected.txt").read_text()
    if run.stdout != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), run.stdout.splitlines(True),
                                            f"examples/{name}.expected.txt", "printed"))
        pytest.fail(f"examples/{name}.py printed something else:\n{diff}", pytrace=False)
