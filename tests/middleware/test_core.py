from __future__ import annotations

import pytest

from slicecount.errors import ConfigurationError
from slicecount.middleware._core import QueryTracking, RequestMetrics
from slicecount.recorder import Recorder
from slicecount.store import Store
from tests.middleware.helpers import by_label, total


def test_exclusions_are_exact_or_prefixes(recorder: Recorder) -> None:
    metrics = RequestMetrics(recorder, exclude_paths=["/health", "/static/*"])
    assert metrics.excluded("/health")
    assert not metrics.excluded("/health/deep")
    assert metrics.excluded("/static/app.css")
    assert not metrics.excluded("/")


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"exclude_paths": ["health"]}, "'health'"),
        ({"labels": {"route": "x"}}, "route"),
        ({"labels": {"bad-name": "x"}}, "'bad-name'"),
        ({"buckets": [1, 0.5]}, "increase"),
        ({"buckets": []}, "at least one"),
    ],
)
def test_bad_options_are_refused_naming_the_value(
    recorder: Recorder, options: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        RequestMetrics(recorder, **options)  # type: ignore[arg-type]
    assert fragment in str(info.value)


def test_a_request_is_one_count_and_one_observation(
    recorder: Recorder, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(QueryTracking, "enabled", False)
    metrics = RequestMetrics(recorder, labels={"app": "shop"})
    metrics.record("GET", "/a", 200, 0.004, None)
    metrics.record("GET", "/a", 200, 0.3, None)
    metrics.record("BREW", "/a", 418, 12.0, None)  # unknown methods fold into OTHER
    metrics.record("GET", None, 404, 0.01, None)
    assert recorder.flush()
    assert by_label(store, "http.requests", "method") == {"GET": 3, "OTHER": 1}
    assert by_label(store, "http.requests", "route") == {"/a": 3, "<unmatched>": 1}
    assert total(store, "http.requests", app="shop") == 4
    buckets = by_label(store, "http.request.duration.bucket", "le", route="/a")
    assert buckets == {"0.005": 1, "0.5": 1, "+Inf": 1}
    assert total(store, "http.request.duration.sum_us", method="GET", route="/a") == 304_000
    assert store.series("http.request.queries.bucket", 60) == []  # no engine instrumented
