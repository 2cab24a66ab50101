"""The pure core: no Redis, no Recorder. A tiny namer stands in for ``Recorder.series_id``."""

from __future__ import annotations

import ast
import importlib.util
from collections import Counter
from pathlib import Path

import pytest

from slicecount.core.series import Labels, encode, parse
from slicecount.errors import ConfigurationError
from slicecount.middleware.mapping import Entries, QueryMapping, RequestMapping, operation_of


class Namer:
    """Names series as the Recorder would (without its cardinality guard) and counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, name: str, labels: Labels) -> str:
        self.calls += 1
        return encode(name, labels)


def tally(*batches: Entries) -> Counter[str]:
    out: Counter[str] = Counter()
    for entries in batches:
        for series_id, n in entries:
            out[series_id] += n
    return out


def by_label(counts: Counter[str], name: str, label: str, **match: str) -> dict[str, int]:
    out: Counter[str] = Counter()
    for series_id, n in counts.items():
        metric, labels = parse(series_id)
        if metric == name and all(labels.get(k) == v for k, v in match.items()):
            out[labels.get(label, "")] += n
    return dict(out)


def test_exclusions_are_exact_or_prefixes() -> None:
    mapping = RequestMapping(Namer(), exclude_paths=["/health", "/static/*"])
    assert mapping.excluded("/health")
    assert not mapping.excluded("/health/deep")
    assert mapping.excluded("/static/app.css")
    assert not mapping.excluded("/")


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"exclude_paths": ["health"]}, "'health'"),
        ({"labels": {"route": "x"}}, "route"),
        ({"labels": {"bad-name": "x"}}, "'bad-name'"),
        ({"buckets": [1, 0.5]}, "increase"),
        ({"buckets": []}, "at least one"),
        ({"query_buckets": [2, 1]}, "increase"),
    ],
)
def test_bad_options_are_refused_naming_the_value(
    options: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        RequestMapping(Namer(), **options)  # type: ignore[arg-type]
    assert fragment in str(info.value)


def test_a_request_is_one_count_and_one_observation() -> None:
    mapping = RequestMapping(Namer(), labels={"app": "shop"})
    counts = tally(
        mapping.entries("GET", "/a", 200, 0.004, None),
        mapping.entries("GET", "/a", 200, 0.3, None),
        mapping.entries("GET", "/a", 200, 0.005, None),  # bounds are inclusive
        mapping.entries("GET", "/a", 200, 12.0, None),
    )
    assert counts['http.requests{app="shop",method="GET",route="/a",status="200"}'] == 4
    buckets = by_label(counts, "http.request.duration.bucket", "le", route="/a")
    assert buckets == {"0.005": 2, "0.5": 1, "+Inf": 1}
    assert counts['http.request.duration.sum_us{app="shop",method="GET",route="/a"}'] == (
        4_000 + 300_000 + 5_000 + 12_000_000
    )
    assert by_label(counts, "http.request.queries.bucket", "le") == {}  # queries not tracked


def test_unknown_methods_fold_into_other_and_misses_are_unmatched() -> None:
    mapping = RequestMapping(Namer())
    counts = tally(
        mapping.entries("BREW", "/pot", 418, 0.01, None),
        mapping.entries("GET", None, 404, 0.01, None),
        mapping.entries("GET", "", 404, 0.01, None),
    )
    assert by_label(counts, "http.requests", "method") == {"OTHER": 1, "GET": 2}
    assert by_label(counts, "http.requests", "route") == {"/pot": 1, "<unmatched>": 2}


def test_queries_of_a_request_are_a_histogram_when_given() -> None:
    mapping = RequestMapping(Namer(), query_buckets=[0, 1, 5])
    counts = tally(
        mapping.entries("GET", "/q", 200, 0.01, 3),
        mapping.entries("GET", "/q", 200, 0.01, 0),
        mapping.entries("GET", "/q", 200, 0.01, 9),
    )
    assert by_label(counts, "http.request.queries.bucket", "le") == {"5": 1, "0": 1, "+Inf": 1}
    assert counts['http.request.queries.sum_us{method="GET",route="/q"}'] == 12_000_000
    assert by_label(counts, "http.requests", "route") == {"/q": 3}


def test_ids_are_named_once_per_method_route_status() -> None:
    namer = Namer()
    mapping = RequestMapping(namer)
    first = mapping.entries("GET", "/a", 200, 0.01, None)
    named = namer.calls
    assert named > 0
    assert mapping.entries("GET", "/a", 200, 2.0, 4)[0] == first[0]
    assert namer.calls == named  # cached, queries included
    mapping.entries("GET", "/a", 500, 0.01, None)
    assert namer.calls == 2 * named  # another status: named afresh
    mapping.forget()
    mapping.entries("GET", "/a", 200, 0.01, None)
    assert namer.calls == 3 * named


def test_the_id_cache_is_bounded() -> None:
    namer = Namer()
    mapping = RequestMapping(namer, max_cached_ids=5)
    for i in range(20):
        mapping.entries("GET", f"/r{i}", 200, 0.01, None)
    calls = namer.calls
    mapping.entries("GET", "/r0", 200, 0.01, None)  # among the first five: remembered
    assert namer.calls == calls
    mapping.entries("GET", "/r19", 200, 0.01, None)  # past the bound: named again
    assert namer.calls > calls


def test_a_label_the_namer_refuses_raises_to_the_shell() -> None:
    mapping = RequestMapping(Namer())
    with pytest.raises(ValueError, match="256"):
        mapping.entries("GET", "/" + "x" * 300, 200, 0.01, None)


@pytest.mark.parametrize(
    ("statement", "operation"),
    [
        ("SELECT 1", "SELECT"),
        ("  (select * from t)", "SELECT"),
        ("\ninsert into t values (1)", "INSERT"),
        ("UPDATE t SET v = 1", "UPDATE"),
        ("delete from t", "DELETE"),
        ("PRAGMA user_version", "OTHER"),
        ("WITH x AS (SELECT 1) SELECT * FROM x", "OTHER"),
        ("", "OTHER"),
    ],
)
def test_operation_of_a_statement(statement: str, operation: str) -> None:
    assert operation_of(statement) == operation


def test_a_statement_is_one_count_and_one_observation() -> None:
    namer = Namer()
    mapping = QueryMapping(namer, buckets=[0.001, 0.01])
    counts = tally(
        mapping.entries("SELECT 1", 0.0005),
        mapping.entries("select 2", 0.002),
        mapping.entries("DELETE FROM t", 1.0),
    )
    calls = namer.calls
    mapping.entries("SELECT 3", 0.0)
    assert namer.calls == calls  # ids remembered per operation
    assert by_label(counts, "db.queries", "operation") == {"SELECT": 2, "DELETE": 1}
    assert by_label(counts, "db.query.duration.bucket", "le", operation="SELECT") == {
        "0.001": 1,
        "0.01": 1,
    }
    assert counts['db.query.duration.sum_us{operation="SELECT"}'] == 2_500
    assert by_label(counts, "db.query.duration.bucket", "le", operation="DELETE") == {"+Inf": 1}


def _imports(module: str, seen: set[str] | None = None) -> set[str]:
    """What ``module``'s source imports, following slicecount's own modules (read, not run:
    importing any of them runs the package ``__init__``, which loads everything)."""
    seen = set() if seen is None else seen
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    for node in ast.walk(ast.parse(Path(spec.origin).read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "slicecount":  # ``from slicecount import default``
                names += [f"slicecount.{a.name}" for a in node.names]
        for name in names:
            if name not in seen:
                seen.add(name)
                if name.startswith("slicecount."):
                    _imports(name, seen)
    return seen


def test_the_core_imports_no_redis_no_recorder_and_no_framework() -> None:
    imported = _imports("slicecount.middleware.mapping")
    assert "slicecount.core.histogram" in imported  # the walk does follow slicecount's modules
    forbidden = {"redis", "flask", "werkzeug", "starlette", "anyio", "sqlalchemy"}
    # "slicecount" itself: the package __init__ loads the Recorder and the Store
    io_modules = {
        "slicecount",
        "slicecount.recording.recorder",
        "slicecount.recording.default",
        "slicecount.embedded",
    }
    assert (
        sorted(
            name
            for name in imported
            if name.split(".")[0] in forbidden
            or name in io_modules
            or name.startswith("slicecount.store")
            or name.startswith("slicecount.middleware.shell")
        )
        == []
    )
