"""Series admission and the cardinality guard (pure)."""

from __future__ import annotations

import pytest

from slicecount.recording.admission import Admission, Warnings


def test_ids_are_validated_cached_and_capped_per_metric() -> None:
    admission = Admission(2, 1000, Warnings())
    a = admission.series_id("m", {"k": "a"})
    assert a == 'm{k="a"}' and admission.series_id("m", {"k": "a"}) is a
    assert admission.series_id("m", {"k": "b"}) == 'm{k="b"}'
    assert admission.series_id("m", {"k": "c"}) == 'm{overflow="true"}'
    assert admission.series_id("other", {"k": "c"}) == 'other{k="c"}'
    with pytest.raises(ValueError, match="bad name"):
        admission.series_id("bad name", None)


def test_histogram_buckets_count_once_and_keep_their_bound() -> None:
    admission = Admission(1, 1000, Warnings())
    for le in ("0.1", "+Inf"):
        assert (
            admission.series_id("h.bucket", {"r": "/", "le": le}) == f'h.bucket{{le="{le}",r="/"}}'
        )
    assert admission.series_id("h.bucket", {"r": "/x", "le": "0.1"}) == (
        'h.bucket{le="0.1",overflow="true"}'
    )


def test_each_cause_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    warnings = Warnings()
    for _ in range(3):
        warnings.once("a", "cause %s", "a")
    warnings.once("b", "cause %s", "b")
    assert [r.getMessage() for r in caplog.records] == ["cause a", "cause b"]
