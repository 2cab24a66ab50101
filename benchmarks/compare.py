"""Before/after: every benchmark against a git revision's ``src/`` and this tree's, in one run.

    python benchmarks/compare.py --before main [--after REV] [--quick] [--cleaner]
                                 [--repeat N] [--only recorder,datasource,prometheus] [--json]
    make bench-compare BEFORE=main ARGS=--quick

``--before REV`` (and ``--after REV``; default: this working tree) is extracted with
``git archive REV src``. Each benchmark script of this tree runs in a fresh process with
``PYTHONPATH=<tree>/src``, alternating before/after (and swapping who goes first on each
repeat), so both sides see the same machine weather. The scripts use only public API
(``Recorder``, ``Store``, ``AsyncStore``, ``create_app``, the HTTP surfaces), so they run on
both trees; what an older tree names differently they ask it for (bench_prometheus.py: the
histogram's name). The table shows each side's best figure over the repeats, after/before of
the bests, and the ratios of each repeat's pair (run back to back): their median and range.
Whether a ratio is good depends on the figure (higher or lower is better): the last column
says "better" or "worse" when the median ratio is past a 10% band, else "~". The machine is
shared: trust the median of several repeats, not one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from figures import JSON_MARK  # beside this file (python puts it on sys.path)

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "benchmarks"
BENCHMARKS: dict[str, tuple[list[str], list[str]]] = {
    # name: (arguments of a full run, arguments of a --quick run that only checks it works)
    "recorder": ([], ["--adds", "20000", "--series", "500", "--incr-events", "200",
                      "--rounds", "1"]),
    "middleware": ([], ["--requests", "200", "--naive-requests", "20", "--rounds", "2",
                        "--traced-requests", "200", "--traced-rounds", "3"]),
    "datasource": (["--loads", "200"], ["--loads", "3"]),  # 200: a p99 of 200 samples, ~10 s
    "prometheus": ([], ["--quick"]),
    "cleaner": ([], ["--names", "200"]),
}  # fmt: skip
NOISE = 0.10
"""Changes within this fraction are shown as "~": the machines are shared and noisy."""

Record = dict[str, Any]


def git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True).stdout


def extract(rev: str, into: Path) -> tuple[Path, str]:
    """``rev``'s src/ under ``into``; returns (the src path, the short commit id)."""
    try:
        commit = git("rev-parse", "--short", "--verify", f"{rev}^{{commit}}").decode().strip()
    except subprocess.CalledProcessError:
        raise SystemExit(f"compare.py: {rev!r} is not a commit of {ROOT}") from None
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=git("archive", commit, "src"), check=True)
    return into / "src", commit


def run(name: str, arguments: list[str], src: Path) -> Record:
    """One run of ``bench_<name>.py`` against ``src``: its JSON record."""
    command = [sys.executable, str(HERE / f"bench_{name}.py"), *arguments, "--json"]
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith(JSON_MARK)]
    if done.returncode != 0 or not lines:
        tail = (done.stdout + done.stderr)[-3000:]
        raise SystemExit(f"compare.py: {' '.join(command)} failed against {src}:\n{tail}")
    record: Record = json.loads(lines[-1][len(JSON_MARK) :])
    if not Path(record["slicecount"]).resolve().is_relative_to(src.resolve()):
        raise SystemExit(f"compare.py: measured {record['slicecount']}, not the tree in {src}")
    return record


def best(records: list[Record]) -> dict[str, Record]:
    """Per figure key, the figure with the best value over the repeats."""
    out: dict[str, Record] = {}
    for record in records:
        for figure in record["figures"]:
            key, value = figure["key"], figure["value"]
            seen = out.get(key)
            if seen is None or seen["value"] is None:
                out[key] = figure
            elif value is not None:
                higher = figure["better"] == "higher"
                if (value > seen["value"]) if higher else (value < seen["value"]):
                    out[key] = figure
    return out


def number(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.4f}"


def paired(before: list[Record], after: list[Record], key: str) -> list[float]:
    """after/before of one figure in each repeat (the two runs of a repeat are back to back)."""
    ratios = []
    for old, new in zip(before, after, strict=True):
        values = [{f["key"]: f["value"] for f in r["figures"]}.get(key) for r in (old, new)]
        if values[0] and values[1] is not None:
            ratios.append(values[1] / values[0])
    return ratios


def verdict(ratios: list[float], better: str) -> tuple[str, str, str]:
    """(median after/before, its range over the repeats, better | worse | ~) of one figure."""
    if not ratios:
        return "n/a", "", ""
    ratio = statistics.median(ratios)
    gain = ratio - 1 if better == "higher" else 1 - ratio
    word = "~" if abs(gain) <= NOISE else ("better" if gain > 0 else "worse")
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}" if len(ratios) > 1 else ""
    return f"{ratio:.2f}x", spread, word


Row = tuple[str, Record, Record | None, list[float]]  # benchmark, after's best, before's, ratios


def table(rows: list[Row]) -> list[str]:
    width = max([len(f["label"]) + len(f["unit"]) + 3 for _, f, _, _ in rows] + [10])
    lines = [
        f"{'benchmark':<11} {'figure':<{width}} {'before':>11} {'after':>11} {'best a/b':>9}"
        f" {'median a/b':>11} {'range':>11}"
    ]
    for name, after, before, ratios in rows:
        label = f"{after['label']} ({after['unit']})"
        old, new = (before["value"] if before is not None else None), after["value"]
        best_ratio = f"{new / old:.2f}x" if old and new is not None else "n/a"
        ratio, spread, word = verdict(ratios, after["better"])
        lines.append(
            f"{name:<11} {label:<{width}} {number(old):>11} {number(new):>11} {best_ratio:>9}"
            f" {ratio:>11} {spread:>11}  {word}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision to compare against")
    parser.add_argument("--after", help="git revision (default: this working tree)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks it all works")
    parser.add_argument("--cleaner", action="store_true", help="also the cleaner benchmark")
    parser.add_argument("--only", help="comma-separated benchmarks, e.g. recorder,datasource")
    parser.add_argument("--repeat", type=int, default=1, help="runs per side and benchmark")
    parser.add_argument("--json", action="store_true", help="print every record as JSON")
    args = parser.parse_args()
    names = [n for n in BENCHMARKS if n != "cleaner" or args.cleaner]
    if args.only:
        names = [n.strip() for n in args.only.split(",")]
        unknown = sorted(set(names) - set(BENCHMARKS))
        if unknown:
            parser.error(f"unknown benchmarks {unknown}; known: {sorted(BENCHMARKS)}")

    with tempfile.TemporaryDirectory(prefix="slicecount-compare-") as tmp:
        before_src, before_id = extract(args.before, Path(tmp) / "before")
        after_src, after_id = (
            extract(args.after, Path(tmp) / "after") if args.after else (ROOT / "src", "")
        )
        after_name = f"{args.after} ({after_id})" if args.after else "this working tree"
        header = (
            f"before: {args.before} ({before_id})   after: {after_name}   "
            f"{'quick sizes, ' if args.quick else ''}{args.repeat} interleaved repeat(s)"
        )
        print(header, flush=True)
        results: dict[str, dict[str, list[Record]]] = {}
        for name in names:
            arguments = BENCHMARKS[name][1 if args.quick else 0]
            sides: dict[str, list[Record]] = {"before": [], "after": []}
            for repeat in range(args.repeat):
                order = ["before", "after"] if repeat % 2 == 0 else ["after", "before"]
                for side in order:
                    src = before_src if side == "before" else after_src
                    print(f"  {name}: {side} run {repeat + 1}/{args.repeat} ...", flush=True)
                    sides[side].append(run(name, arguments, src))
            results[name] = sides

    if args.json:
        print(json.dumps({"before": before_id, "after": after_id or "worktree", **results}))
        return
    rows: list[Row] = []
    for name, sides in results.items():
        before, after = best(sides["before"]), best(sides["after"])
        rows += [
            (name, figure, before.get(key), paired(sides["before"], sides["after"], key))
            for key, figure in after.items()
        ]
    print()
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
