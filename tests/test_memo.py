"""Work remembered by the identity of label sets: made once for the same dicts, again for
others, forgotten past its bound; the aggregations that use it answer as before."""

from __future__ import annotations

import pytest

from slicecount.core import memo
from slicecount.promql.arrays import Block, check_unique
from slicecount.promql.ast import Aggregate, NumberLiteral
from slicecount.promql.groups import aggregate
from slicecount.promql.values import EvaluationError

np = pytest.importorskip("numpy")


def test_the_same_label_sets_are_worked_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memo, "_entries", {})
    monkeypatch.setattr(memo, "_held", [0])
    labels = [{"route": "/a"}, {"route": "/b"}]
    made: list[int] = []

    def make() -> int:
        made.append(1)
        return len(made)

    assert memo.remembered("x", labels, make) == 1
    assert memo.remembered("x", list(labels), make) == 1  # another list, the same dicts
    assert memo.remembered("y", labels, make) == 2  # another question
    assert memo.remembered("x", [dict(d) for d in labels], make) == 3  # equal, not the same
    monkeypatch.setattr(memo, "REMEMBERED", 7)
    assert memo.remembered("z", labels, make) == 4  # 8 sets held: every entry forgotten
    assert memo._held[0] == 2
    assert memo.remembered("x", labels, make) == 5
    monkeypatch.setattr(memo, "REMEMBERED", 4)
    for n in range(6, 10):  # empty label sets (a scalar's) weigh one each: bounded too
        assert memo.remembered("e", [{}], make) == n
    assert len(memo._entries) <= 4


def test_aggregations_answer_alike_whether_their_groups_were_remembered() -> None:
    labels = [{"route": r, "status": s} for r in ("/a", "/b") for s in ("200", "500")]
    values = np.arange(8, dtype=np.float64).reshape(4, 2)
    block = Block(labels, values, np.ones((4, 2), dtype=bool))
    node = Aggregate("sum", NumberLiteral(0.0), grouping=("route",))
    first = aggregate(node, block)
    again = aggregate(node, Block(list(labels), values * 2, block.present))
    assert first.labels == again.labels == [{"route": "/a"}, {"route": "/b"}]
    assert first.labels is not again.labels  # an answer's list is its own
    assert first.values.tolist() == [[2.0, 4.0], [10.0, 12.0]]
    assert again.values.tolist() == [[4.0, 8.0], [20.0, 24.0]]


def test_labels_met_twice_are_still_refused_where_samples_meet() -> None:
    twice = {"route": "/a"}
    unique = [twice, {"route": "/b"}]
    block = Block(unique, np.ones((2, 1)), np.ones((2, 1), dtype=bool))
    assert check_unique(block) is block
    assert check_unique(block) is block  # remembered
    clash = Block([twice, dict(twice)], np.ones((2, 1)), np.ones((2, 1), dtype=bool))
    with pytest.raises(EvaluationError, match="same labelset"):
        check_unique(clash)
    apart = Block([twice, dict(twice)], np.ones((2, 2)), np.array([[True, False], [False, True]]))
    assert check_unique(apart).values.tolist() == [[1.0, 1.0]]


def test_quantiles_of_the_same_buckets_again_answer_alike() -> None:
    from slicecount.promql.buckets import histogram_quantile

    buckets = [{"route": r, "le": le} for r in ("/a", "/b") for le in ("0.1", "1", "+Inf")]
    counts = np.array([[1.0], [3.0], [4.0], [0.0], [2.0], [2.0]])
    block = Block(buckets, counts, np.ones((6, 1), dtype=bool))
    first = histogram_quantile([0.5], block)
    again = histogram_quantile([0.5], Block(list(buckets), counts * 2, block.present))
    assert first.labels == again.labels == [{"route": "/a"}, {"route": "/b"}]
    assert first.labels is not again.labels
    assert first.values.tolist() == again.values.tolist() == [[0.55], [0.55]]
