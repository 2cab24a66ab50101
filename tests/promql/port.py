"""Copy the eval cases of Prometheus' promqltest scripts that fit slicecount into
``tests/promql/cases``, with the loads and clears they need, and say why the others stay out.

    python -m tests.promql.port <prometheus git dir> [commit]

The scripts are read with ``git show <commit>:promql/promqltest/testdata/<name>.test``.
A case stays out when its query uses something outside the subset (a function or aggregation
slicecount lacks or that the ported set leaves out, ``@``, a subquery), when it expects what
the interpreter cannot check (a native histogram, a range vector), or when its data do not
fit slicecount's totals (``promqltest.Unfit``). A case slicecount's parser refuses is copied
all the same: the test shows it, and the skip list of ``test_prometheus_cases`` says why.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from slicecount.errors import QueryError
from slicecount.promql.signatures import AGGREGATIONS, FUNCTIONS, UNSUPPORTED
from tests.promql.promqltest import (
    Case,
    Clear,
    Eval,
    Load,
    ScriptError,
    Unfit,
    parse_script,
    prepare,
)

SOURCES = (
    "operators",
    "aggregators",
    "functions",
    "histograms",
    "literals",
    "selectors",
    "collision",
)
CASES = Path(__file__).parent / "cases"
EXTRAPOLATING = frozenset({"rate", "increase", "irate"})
"""In the subset, but exact differences in slicecount: Prometheus' cases do not apply."""
ALLOWED = (set(FUNCTIONS) | AGGREGATIONS | {"by", "without", "on", "ignoring", "bool"}) | {
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "offset",
} - EXTRAPOLATING
OUTSIDE = UNSUPPORTED | {"atan2", "count_values", "limitk", "limit_ratio"}
"""Operators and aggregations outside the subset (functions are found by their call)."""
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^}]*\}")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_SUBQUERY = re.compile(r"\[[^\]]*:[^\]]*\]")
_MODIFIERS = re.compile(r"\b(smoothed|anchored)\b")


def outside_subset(ev: Eval) -> str | None:
    """Why a case's query or expectation is outside what is ported, or None."""
    if ev.unsupported is not None:
        return ev.unsupported
    code = _BRACES.sub("{}", _STRING.sub('""', ev.expr))
    if "@" in code:
        return "the @ modifier"
    if _SUBQUERY.search(code):
        return "a subquery"
    if _MODIFIERS.search(code):
        return "smoothed/anchored range selectors"
    for word in _WORD.findall(code):
        if word.lower() in OUTSIDE:
            return f"{word.lower()} is outside the ported subset"
    for name in _CALL.findall(code):
        if name in EXTRAPOLATING:
            return "rate/increase/irate (slicecount's are exact, not extrapolated)"
        if name.lower() not in ALLOWED and name not in ALLOWED:
            return f"{name}() is outside the ported subset"
    return None


def fits(case: Case) -> str | None:
    """Why the case's data do not fit slicecount's totals, or None."""
    try:
        prepare(case)
    except Unfit as exc:
        return f"data model: {exc}"
    except QueryError:
        return None  # copied: slicecount refuses the query, the test shows it
    return None


def port(name: str, text: str, commit: str) -> tuple[str, Counter[str], int]:
    """The ported script, the reasons cases stayed out, and how many were kept."""
    lines = text.split("\n")
    commands = parse_script(text, f"{name}.test")
    loads: list[Load] = []
    keep: set[int] = set()  # indexes into commands
    reasons: Counter[str] = Counter()
    section: list[int] = []
    for index, command in enumerate(commands):
        if isinstance(command, Clear):
            loads, section = [], []
            keep.add(index)
            continue
        if isinstance(command, Load):
            loads.append(command)
            section.append(index)
            continue
        reason = outside_subset(command) or fits(Case(command, tuple(loads)))
        if reason is not None:
            reasons[reason] += 1
            continue
        keep.add(index)
        keep.update(section)
    out = [
        f"# Ported from promql/promqltest/testdata/{name}.test of github.com/prometheus/prometheus",
        f"# at commit {commit}, licensed under the Apache License 2.0",
        "# (https://github.com/prometheus/prometheus/blob/main/LICENSE).",
        "# Only the eval cases that fit slicecount's PromQL subset and data model are kept",
        "# (tests/promql/port.py), with the loads and clears they need; native histogram series",
        "# are left out of the loads.",
        "",
    ]
    kept = 0
    last_clear = True
    for index, command in enumerate(commands):
        if index not in keep:
            continue
        if isinstance(command, Clear):
            if not last_clear:
                out += ["clear", ""]
            last_clear = True
            continue
        last_clear = False
        block = lines[command.line - 1 : command.end]
        if isinstance(command, Load):
            block = [line for line in block if "{{" not in line]
            if len(block) == 1:
                continue
        else:
            kept += 1
        out += _comments(lines, command.line - 1) + [line.rstrip() for line in block] + [""]
    while out[-1] in ("", "clear"):
        out.pop()
    out.insert(6, f"# Kept {kept} of {kept + sum(reasons.values())} eval cases.")
    return "\n".join(out) + "\n", reasons, kept


def _comments(lines: list[str], first: int) -> list[str]:
    """The comment lines right above line index ``first``."""
    start = first
    while start > 0 and lines[start - 1].strip().startswith("#"):
        start -= 1
    return [line.rstrip() for line in lines[start:first]]


def main(argv: list[str]) -> int:
    git_dir = argv[1]
    commit = argv[2] if len(argv) > 2 else "HEAD"
    commit = subprocess.run(
        ["git", "--git-dir", git_dir, "rev-parse", commit],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    CASES.mkdir(exist_ok=True)
    total: Counter[str] = Counter()
    for name in SOURCES:
        text = subprocess.run(
            [
                "git",
                "--git-dir",
                git_dir,
                "show",
                f"{commit}:promql/promqltest/testdata/{name}.test",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        try:
            ported, reasons, kept = port(name, text, commit)
        except ScriptError as exc:
            print(f"{name}.test: {exc}", file=sys.stderr)
            return 1
        (CASES / f"{name}.test").write_text(ported, encoding="utf-8")
        print(f"{name}.test: kept {kept}, left out {sum(reasons.values())}")
        total["kept"] += kept
        total.update(reasons)
    print(f"kept {total.pop('kept')} cases; left out:")
    for reason, count in total.most_common():
        print(f"  {count:4d}  {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
