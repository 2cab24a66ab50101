"""Prometheus' own engine tests (promqltest scripts, ported to ``cases/`` by ``port.py``) run
on slicecount's engine: one test per eval case, named ``<file>:<line>`` of ``cases/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from slicecount.errors import QueryError
from tests.promql import promqltest
from tests.promql.promqltest import Case

CASES_DIR = Path(__file__).parent / "cases"
CASES = [case for path in sorted(CASES_DIR.glob("*.test")) for case in promqltest.load_cases(path)]

SKIP: dict[str, str] = {
    "functions.test:274": "timestamp() gives the evaluation time: slicecount's totals are exact "
    "at any time, there is no older sample to date"
}
"""Cases that fail for a deliberate difference or an unsupported feature: id -> why."""


def _param(case: Case) -> object:
    marks = [pytest.mark.skip(reason=SKIP[case.id])] if case.id in SKIP else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_case(case: Case) -> None:
    if case.eval.fail:
        with pytest.raises(QueryError):
            promqltest.run(case)
        return
    problems = promqltest.compare(case, promqltest.run(case))
    assert not problems, f"{case.eval.expr}\n" + "\n".join(problems)


def test_the_skip_list_names_cases() -> None:
    assert set(SKIP) <= {case.id for case in CASES}


def test_the_cases_are_there() -> None:
    assert len(CASES) > 300
