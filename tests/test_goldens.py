"""Every golden case in traces/expected/ is a test: a changed number fails with the diff table.

Regenerate after an intended change with ``npusim regress --update`` (and commit the YAML).
"""

import pytest

from helpers import REPO
from npusim import regress

CASES = regress.load_goldens(REPO / "traces" / "expected")


def test_goldens_cover_every_trace_pipeline_and_budget():
    from helpers import TRACE_NAMES

    ids = {c.id for c in CASES}
    wanted = {f"{t}/{h}/{p}/{b}" for t, h, p, b in regress.default_matrix()}
    assert {t for t, *_ in regress.default_matrix()} == set(TRACE_NAMES)
    assert wanted <= ids, f"missing {sorted(wanted - ids)[:3]}: run npusim regress --update"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_golden(case):
    mismatches = regress.check_case(case)
    if mismatches:
        pytest.fail(f"{case.file.name}: numbers moved (npusim regress --update if intended)\n"
                    + regress.format_diff(mismatches), pytrace=False)
