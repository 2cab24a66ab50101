"""Engine behaviours the ported Prometheus cases do not reach."""

from __future__ import annotations

from slicecount.promql.ast import VectorSelector, walk
from slicecount.promql.engine import as_vector, evaluate
from slicecount.promql.parser import parse
from slicecount.promql.values import Grid, Raw


def run(text: str, times: tuple[float, ...]) -> list[tuple[dict[str, str], list[float | None]]]:
    node = parse(text)
    grid = Grid(times, 10, first=0, oldest=0, newest=1000)
    data = {
        n: [Raw({"__name__": "x", "a": "1"}, list(range(101)))]
        for n in walk(node)
        if isinstance(n, VectorSelector) and n.matches({"__name__": "x", "a": "1"})
    }
    data.update({n: [] for n in walk(node) if isinstance(n, VectorSelector) and n not in data})
    return [(s.labels, s.values) for s in as_vector(evaluate(node, grid, data))]


def test_timestamp_of_an_offset_selector_is_its_sample_time() -> None:
    assert run("timestamp(x offset 1m)", (600.0, 700.0)) == [({"a": "1"}, [540.0, 640.0])]
    assert run("timestamp(-x)", (600.0,)) == [({"a": "1"}, [600.0])]


def test_absent_leaves_out_labels_matched_empty() -> None:
    assert run('absent(nothing{foo="", job="j"})', (600.0,)) == [({"job": "j"}, [1.0])]
    assert run('absent(x{a="1"})', (600.0,)) == []
