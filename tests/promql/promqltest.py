"""A small interpreter for Prometheus' promqltest scripts (``promql/promqltest/README.md`` in
github.com/prometheus/prometheus), the part that fits slicecount's engine.

Commands: ``load <interval>`` (and ``load_with_nhcb``, whose derived native histograms no
ported case may read), ``clear``, ``eval instant at <t> <expr>``, ``eval range from <a> to <b>
step <s> <expr>``, the old ``eval_fail`` / ``eval_ordered`` / ``eval_warn`` / ``eval_info``
and the new ``expect fail|ordered|warn|info|no_warn|no_info`` and ``expect string`` lines.
Annotations are not checked: slicecount's engine has none.

How a script becomes a slicecount ``Grid`` and ``Raw`` totals (the choice this file makes):

* Times start at 0, as in promqltest. The precision ``p`` of a case is the greatest common
  divisor (in whole seconds) of the load intervals, the evaluation times, the step, and every
  offset and range of the query, so that every time the engine reads is a slice boundary.
* Each series becomes the list of what Prometheus' instant selector sees at every boundary
  ``k * p`` from ``-p`` (``Grid.first``) to the newest boundary the query reads: the sample
  at that time, else the last sample of the 5 minutes before (the lookback, left-open as in
  Prometheus 3, cut short by a stale marker). ``Grid.oldest`` is ``-p``, so that the instant
  selector reads boundary 0 (it needs t > oldest) and a window ``(t - d, t]`` may start at
  ``-p`` and hold the samples from 0; the total at ``-p`` itself is never read. The list ends
  after the last boundary where the series has a value, so later times have no sample, as in
  Prometheus.
* What cannot be written this way makes a case not fit (``Unfit``, raised before evaluating):
  an instant selector reading a series at a time where Prometheus sees no sample but a later
  one exists (before its first sample, or in a gap longer than the lookback); a range window
  whose boundaries are not all real samples of the series (a gap, a stale marker, a load
  coarser than ``p``, or a window reaching before 0), unless neither side has a sample; a
  selector matching a native histogram.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from slicecount.promql.ast import MatrixSelector, Node, VectorSelector, walk
from slicecount.promql.engine import Evaluator, Result, as_scalar, as_vector
from slicecount.promql.parser import parse
from slicecount.promql.values import Grid, Raw, Series

Labels = dict[str, str]
Stale = Literal["stale"]
STALE: Stale = "stale"
Point = float | None | Stale
"""A loaded value: a number, ``None`` for ``_`` (no sample), or a stale marker."""

LOOKBACK_MS = 5 * 60 * 1000
NAME = "__name__"
BUCKET = "le"


class ScriptError(ValueError):
    """A line of a script this interpreter cannot read."""


class Unfit(Exception):
    """The case cannot be written as slicecount's data (the message says why)."""


# -- durations and numbers ----------------------------------------------------------------------

_UNIT_MS = {
    "y": 365 * 86_400_000,
    "w": 7 * 86_400_000,
    "d": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1000,
    "ms": 1,
}
_DURATION = re.compile(r"(?:\d+(?:ms|[ywdhms]))+")
_DURATION_PART = re.compile(r"(\d+)(ms|[ywdhms])")


def duration_ms(text: str) -> int:
    """Prometheus' ``model.ParseDuration`` in milliseconds (``0`` allowed bare)."""
    text = text.strip()
    if text == "0":
        return 0
    if not _DURATION.fullmatch(text):
        raise ScriptError(f"not a duration: {text!r}")
    return sum(int(n) * _UNIT_MS[unit] for n, unit in _DURATION_PART.findall(text))


_NUMBER = r"(?:[iI][nN][fF]|[nN][aA][nN]|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
_ITEM = re.compile(
    rf"(?P<base>[-+]?{_NUMBER}|stale|_)(?:(?P<delta>[-+]{_NUMBER})?x(?P<times>\d+))?"
)


def number(text: str) -> float:
    """A number of a script (Go's ParseInt with base 0, then ParseFloat)."""
    text = text.strip()
    if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", text):
        return float(int(text, 16))
    if not re.fullmatch(rf"[-+]?{_NUMBER}", text):
        raise ScriptError(f"not a number: {text!r}")
    return float(text)


def points(text: str) -> list[Point]:
    """Expand a series' values: ``a+bxn``, ``a-bxn``, ``axn`` (n + 1 values), ``_``, ``_xn``
    (n missing), ``stale``."""
    out: list[Point] = []
    for item in text.split():
        match = _ITEM.fullmatch(item)
        if match is None:
            raise ScriptError(f"bad series value {item!r}")
        base, delta, times = match.group("base", "delta", "times")
        if base == "_":
            if delta is not None:
                raise ScriptError(f"bad series value {item!r}")
            out += [None] * (int(times) if times is not None else 1)
            continue
        if base == STALE:
            if delta is not None:
                raise ScriptError(f"bad series value {item!r}")
            out += [STALE] * (int(times) + 1 if times is not None else 1)
            continue
        value = float(base)
        if times is None:
            out.append(value)
            continue
        step = float(delta) if delta is not None else 0.0
        for _ in range(int(times) + 1):
            out.append(value)
            value += step  # accumulated, as Prometheus' parser does
    return out


# -- series descriptions ------------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))")
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def unquote(token: str) -> str:
    """A Go string literal's value."""
    body = token[1:-1]
    if token[0] == "`":
        return body

    def one(match: re.Match[str]) -> str:
        hex2, hex4, hex8, other = match.groups()
        code = hex2 or hex4 or hex8
        if code:
            return chr(int(code, 16))
        return _SIMPLE_ESCAPES.get(other, other)

    return _ESCAPE.sub(one, body)


def series_description(text: str) -> tuple[Labels, str]:
    """``name{label="value", ...} rest`` -> (labels with ``__name__``, rest)."""
    labels: Labels = {}
    pos = 0
    name = _IDENT.match(text)
    if name is not None:
        labels[NAME] = name.group()
        pos = name.end()
    if text.startswith("{", pos) and not text.startswith("{{", pos):
        pos += 1
        while True:
            while text.startswith(" ", pos):
                pos += 1
            if text.startswith("}", pos):
                pos += 1
                break
            quoted = _QUOTED.match(text, pos)
            ident = _IDENT.match(text, pos)
            token = quoted or ident
            if token is None:
                raise ScriptError(f"bad series description {text!r}")
            pos = token.end()
            label = unquote(token.group()) if quoted else token.group()
            while text.startswith(" ", pos):
                pos += 1
            if text.startswith("=", pos):
                value = _QUOTED.match(text, pos + 1)
                if value is None:
                    raise ScriptError(f"bad label value in {text!r}")
                labels[label] = unquote(value.group())
                pos = value.end()
            elif quoted:
                labels[NAME] = label  # {"metric.name", ...}
            else:
                raise ScriptError(f"bad series description {text!r}")
            while text.startswith(" ", pos):
                pos += 1
            if text.startswith(",", pos):
                pos += 1
    if pos == 0:
        raise ScriptError(f"bad series description {text!r}")
    return {k: v for k, v in labels.items() if v != ""}, text[pos:]


# -- commands -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Loaded:
    labels: Labels
    points: tuple[Point, ...]
    histogram: bool = False  # a native histogram (native or derived by load_with_nhcb)


@dataclass(frozen=True)
class Load:
    line: int
    end: int
    interval_ms: int
    series: tuple[Loaded, ...]


@dataclass(frozen=True)
class Clear:
    line: int
    end: int


@dataclass(frozen=True)
class Expected:
    labels: Labels
    values: tuple[float | None, ...]  # None: no point at that step


@dataclass(frozen=True)
class Eval:
    file: str
    line: int
    end: int
    expr: str
    start_ms: int
    end_ms: int
    step_ms: int  # 0 for an instant query
    fail: bool = False
    ordered: bool = False
    scalar: float | None = None
    string: str | None = None
    expected: tuple[Expected, ...] = ()
    unsupported: str | None = None  # an expectation this interpreter does not check

    @property
    def instant(self) -> bool:
        return self.step_ms == 0

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"

    def times_ms(self) -> list[int]:
        if self.instant:
            return [self.start_ms]
        return list(range(self.start_ms, self.end_ms + 1, self.step_ms))


Command = Load | Clear | Eval

_EVAL_INSTANT = re.compile(r"eval(?:_(fail|warn|ordered|info))?\s+instant\s+(?:at\s+(.+?))?\s+(.+)")
_EVAL_RANGE = re.compile(
    r"eval(?:_(fail|warn|info))?\s+range\s+from\s+(.+)\s+to\s+(.+)\s+step\s+(.+?)\s+(.+)"
)
_LOAD = re.compile(r"load(?:_(with_nhcb))?\s+(.+?)")
_EXPECT = re.compile(r"expect\s+(ordered|fail|warn|no_warn|info|no_info)(?:\s+(regex|msg):(.+))?")


def script_lines(text: str) -> list[str]:
    """promqltest's ``getLines``: trimmed, comments blank."""
    lines = [line.strip() for line in text.split("\n")]
    return ["" if line.startswith("#") else line for line in lines]


def parse_script(text: str, file: str) -> list[Command]:
    lines = script_lines(text)
    commands: list[Command] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line:
            i += 1
            continue
        word = line.split(None, 1)[0].lower()
        if word == "clear":
            commands.append(Clear(i + 1, i + 1))
            i += 1
        elif word.startswith("load"):
            i = _parse_load(lines, i, commands)
        elif word.startswith("eval"):
            i = _parse_eval(lines, i, file, commands)
        else:
            raise ScriptError(f"{file}:{i + 1}: unknown command {line!r}")
    return commands


def _block(lines: list[str], i: int) -> int:
    """The index after the block of non-blank lines starting at ``i``."""
    j = i + 1
    while j < len(lines) and lines[j]:
        j += 1
    return j


def _parse_load(lines: list[str], i: int, commands: list[Command]) -> int:
    match = _LOAD.fullmatch(lines[i])
    if match is None:
        raise ScriptError(f"line {i + 1}: bad load command {lines[i]!r}")
    nhcb = match.group(1) is not None
    interval = duration_ms(match.group(2))
    end = _block(lines, i)
    series: list[Loaded] = []
    for line in lines[i + 1 : end]:
        labels, rest = series_description(line)
        if "{{" in rest:
            series.append(Loaded(labels, (), histogram=True))
            continue
        series.append(Loaded(labels, tuple(points(rest))))
        name = labels.get(NAME, "")
        if nhcb and name.endswith("_bucket") and BUCKET in labels:
            derived = {k: v for k, v in labels.items() if k != BUCKET}
            derived[NAME] = name.removesuffix("_bucket")
            series.append(Loaded(derived, (), histogram=True))
    commands.append(Load(i + 1, end, interval, tuple(series)))
    return end


def _parse_eval(lines: list[str], i: int, file: str, commands: list[Command]) -> int:
    header = lines[i]
    instant = _EVAL_INSTANT.fullmatch(header)
    ranged = _EVAL_RANGE.fullmatch(header)
    if instant is not None:
        modifier, at, expr = instant.groups()
        start = stop = duration_ms(at or "0")
        step = 0
    elif ranged is not None:
        modifier, start_text, stop_text, step_text, expr = ranged.groups()
        start, stop, step = map(duration_ms, (start_text, stop_text, step_text))
    else:
        raise ScriptError(f"{file}:{i + 1}: bad eval command {header!r}")
    fail = modifier == "fail"
    ordered = modifier == "ordered"
    scalar: float | None = None
    string: str | None = None
    unsupported: str | None = None
    expected: list[Expected] = []
    j = i + 1
    while j < len(lines) and lines[j]:
        line = lines[j]
        j += 1
        if line.startswith(("expected_fail_message", "expected_fail_regexp")):
            break
        if line.startswith("expect range vector"):
            unsupported = "expect range vector"
            continue
        if line.startswith("expect string"):
            string = unquote(line.removeprefix("expect string").strip())
            continue
        if line.split(" ")[0] == "expect":
            expect = _EXPECT.fullmatch(line)
            if expect is None:
                raise ScriptError(f"{file}:{j}: bad expect line {line!r}")
            fail = fail or expect.group(1) == "fail"
            ordered = ordered or expect.group(1) == "ordered"
            continue
        try:
            scalar = number(line)
        except ScriptError:
            pass
        else:
            break  # as promqltest: a scalar ends the expectations
        labels, rest = series_description(line)
        if "{{" in rest:
            unsupported = "a native histogram in the expected result"
            continue
        values = points(rest)
        if any(v == STALE for v in values):
            raise ScriptError(f"{file}:{j}: stale in an expected result")
        expected.append(Expected(labels, tuple(v for v in values if v != STALE)))
    commands.append(
        Eval(
            file,
            i + 1,
            j,
            expr,
            start,
            stop,
            step,
            fail,
            ordered,
            scalar,
            string,
            tuple(expected),
            unsupported,
        )
    )
    return j


@dataclass(frozen=True)
class Case:
    """One eval with the loads it sees (those since the last ``clear``)."""

    eval: Eval
    loads: tuple[Load, ...]

    @property
    def id(self) -> str:
        return self.eval.id


def cases(text: str, file: str) -> list[Case]:
    out: list[Case] = []
    loads: list[Load] = []
    for command in parse_script(text, file):
        if isinstance(command, Clear):
            loads = []
        elif isinstance(command, Load):
            loads.append(command)
        else:
            out.append(Case(command, tuple(loads)))
    return out


def load_cases(path: Path) -> list[Case]:
    return cases(path.read_text(encoding="utf-8"), path.name)


# -- the data a case's query reads --------------------------------------------------------------


@dataclass
class Stored:
    """One series of the test storage: its samples by time (ms)."""

    labels: Labels
    samples: dict[int, float | Stale] = field(default_factory=dict)
    histogram: bool = False
    _times: list[int] | None = None

    def times(self) -> list[int]:
        if self._times is None:
            self._times = sorted(self.samples)
        return self._times

    def at(self, t: int) -> float | None:
        """What an instant selector sees at ``t``: the last sample in ``(t - 5m, t]``."""
        times = self.times()
        index = bisect.bisect_right(times, t) - 1
        if index < 0 or times[index] <= t - LOOKBACK_MS:
            return None
        value = self.samples[times[index]]
        return None if value == STALE else value

    def real(self, t: int) -> bool:
        """Whether a (non-stale) sample sits exactly at ``t``."""
        value = self.samples.get(t)
        return value is not None and value != STALE


def storage(loads: Iterable[Load]) -> list[Stored]:
    by_labels: dict[tuple[tuple[str, str], ...], Stored] = {}
    for load in loads:
        for loaded in load.series:
            key = tuple(sorted(loaded.labels.items()))
            stored = by_labels.setdefault(key, Stored(loaded.labels))
            stored.histogram = stored.histogram or loaded.histogram
            for k, value in enumerate(loaded.points):
                if value is not None:
                    stored.samples[k * load.interval_ms] = value
    return list(by_labels.values())


@dataclass(frozen=True)
class Prepared:
    node: Node
    grid: Grid
    data: Mapping[VectorSelector, Sequence[Raw]]


def _gcd(values: Iterable[float]) -> int:
    out = 0
    for v in values:
        if v != int(v):
            raise Unfit("a time or duration that is not a whole number of milliseconds")
        out = math.gcd(out, abs(int(v)))
    return out


def prepare(case: Case) -> Prepared:
    """Parse the query and write the loaded series as a grid and running totals (QueryError
    when slicecount's parser refuses the query, Unfit when the case does not fit)."""
    ev = case.eval
    node = parse(ev.expr)
    selectors = [n for n in walk(node) if isinstance(n, VectorSelector)]
    ranges = {
        id(n.vector): round(n.range * 1000) for n in walk(node) if isinstance(n, MatrixSelector)
    }
    offsets = {id(s): round(s.offset * 1000) for s in selectors}
    times = ev.times_ms()
    p_ms = (
        _gcd(
            [load.interval_ms for load in case.loads]
            + [ev.start_ms, ev.end_ms, ev.step_ms]
            + list(offsets.values())
            + list(ranges.values())
        )
        or 60_000
    )
    if p_ms % 1000:
        raise Unfit("a time, interval, offset or range that is not a whole number of seconds")
    newest = max([t - o for t in times for o in offsets.values()] + [0])
    stored = storage(case.loads)
    count = newest // p_ms + 2  # boundaries -p, 0, p, ..., newest
    totals: dict[int, list[float]] = {}
    for s in stored:
        if s.histogram:
            continue
        seen = [s.at((k - 1) * p_ms) for k in range(count)]
        while seen and seen[-1] is None:
            seen.pop()
        totals[id(s)] = [math.nan if v is None else v for v in seen]
    data: dict[VectorSelector, list[Raw]] = {}
    for selector in selectors:
        matched = [s for s in stored if selector.matches(s.labels)]
        for s in matched:
            if s.histogram:
                raise Unfit("a selector matches a native histogram")
            _check(
                s,
                len(totals[id(s)]),
                times,
                offsets[id(selector)],
                ranges.get(id(selector)),
                p_ms,
                newest,
            )
        data[selector] = [Raw(dict(s.labels), totals[id(s)]) for s in matched]  # type: ignore[arg-type]
    p = p_ms // 1000
    grid = Grid(tuple(t / 1000 for t in times), p, first=-p, oldest=-p, newest=newest // 1000)
    return Prepared(node, grid, data)


def _check(
    s: Stored, size: int, times: list[int], offset: int, span: int | None, p: int, newest: int
) -> None:
    """Unfit when the engine would see something else than Prometheus in ``s``."""

    def present(a: int) -> bool:  # the engine has a total at boundary a
        return -p <= a <= newest and (a + p) // p < size

    for t in times:
        a = t - offset
        if span is None:
            if (s.at(a) is not None) != (a > -p and present(a)):
                raise Unfit("an instant selector reads a time where the series has no sample")
            continue
        b = a - span
        ours = b >= -p and present(a)
        if ours and all(s.real(x) for x in range(b + p, a + 1, p)):
            continue
        if not ours and not any(s.real(x) for x in s.times() if b < x <= a):
            continue
        raise Unfit("a range window is not made of samples of the series at every boundary")


# -- running a case -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """A query's result in promqltest's terms."""

    scalar: float | None = None
    string: str | None = None
    series: tuple[tuple[Labels, tuple[float | None, ...]], ...] = ()


def run(case: Case) -> Outcome:
    prepared = prepare(case)
    result: Result = Evaluator(prepared.grid, prepared.data, 10**9).evaluate(prepared.node)
    return outcome(case, result)


def outcome(case: Case, result: Result) -> Outcome:
    if isinstance(result, str):
        return Outcome(string=result)
    if result and not isinstance(result[0], Series):
        numbers = as_scalar(result)
        if case.eval.instant:
            return Outcome(scalar=numbers[0])
        return Outcome(series=(({}, tuple(numbers)),))
    merged: dict[tuple[tuple[str, str], ...], tuple[Labels, list[float | None]]] = {}
    for s in as_vector(result):
        key = tuple(sorted(s.labels.items()))
        if key not in merged:
            merged[key] = (dict(s.labels), list(s.values))
            continue
        values = merged[key][1]
        for i, v in enumerate(s.values):
            if v is not None:
                if values[i] is not None:
                    raise AssertionError(f"two series with the labels {s.labels} at one time")
                values[i] = v
    return Outcome(
        series=tuple(
            (labels, tuple(values))
            for labels, values in merged.values()
            if any(v is not None for v in values)
        )
    )


def same(a: float | None, b: float | None) -> bool:
    """Values equal within a relative 1e-9 (NaN equals NaN)."""
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=1e-9)


def compare(case: Case, got: Outcome) -> list[str]:
    """What differs between a case's expectation and ``got`` (empty: it passes)."""
    ev = case.eval
    if ev.string is not None:
        return [] if got.string == ev.string else [f"expected string {ev.string!r}, got {got}"]
    if ev.scalar is not None:
        if got.scalar is None or not same(got.scalar, ev.scalar):
            return [f"expected scalar {ev.scalar}, got {got}"]
        return []
    if got.scalar is not None or got.string is not None:
        return [f"expected a vector, got {got}"]
    steps = len(ev.times_ms())
    want = {_key(e.labels): e for e in ev.expected}
    have = {_key(labels): (labels, values) for labels, values in got.series}
    problems = [
        f"missing {_show(want[k].labels)} {list(want[k].values)}" for k in want if k not in have
    ]
    problems += [
        f"unexpected {_show(have[k][0])} {list(have[k][1])}" for k in have if k not in want
    ]
    for k in want.keys() & have.keys():
        expected = list(want[k].values)[:steps] + [None] * max(0, steps - len(want[k].values))
        values = have[k][1]
        if len(want[k].values) > steps or not all(map(same, expected, values)):
            problems.append(f"{_show(want[k].labels)}: expected {expected}, got {list(values)}")
    if ev.ordered and not problems:
        order = [_key(labels) for labels, _ in got.series]
        if order != [_key(e.labels) for e in ev.expected]:
            problems.append(f"expected the order {[_show(e.labels) for e in ev.expected]}")
    return problems


def _key(labels: Labels) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _show(labels: Labels) -> str:
    body = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != NAME)
    return labels.get(NAME, "") + "{" + body + "}"
