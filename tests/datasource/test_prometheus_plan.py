"""The pure parts of the Prometheus API: names, parameters and the choice of precision."""

from __future__ import annotations

import pytest

from slicecount.config import Settings
from slicecount.datasource.prometheus.params import BadData, Params, parse_step, parse_time
from slicecount.promql.parser import parse
from slicecount.query.catalogue import Catalogue, Source, derive, exposed
from slicecount.query.precision import choose, evaluation_times, needs

NOW = 1_700_006_400 + 7230  # 30 s into a minute


@pytest.mark.parametrize(
    ("stored", "names"),
    [
        ("http.requests", [("http_requests_total", "counter")]),
        ("db.queries", [("db_queries_total", "counter")]),
        ("jobs_total", [("jobs_total", "counter")]),  # no second _total
        ("odd-name:x", [("odd_name:x_total", "counter")]),
        ("http.request.duration.bucket", [  # observed in seconds: the unit in the name
            ("http_request_duration_seconds_bucket", "bucket"),
            ("http_request_duration_seconds_count", "count"),
        ]),
        ("http.request.duration.sum_us", [("http_request_duration_seconds_sum", "sum")]),
        ("db.query.duration.sum_us", [("db_query_duration_seconds_sum", "sum")]),
        ("http.request.queries.bucket", [  # a count of queries: no unit
            ("http_request_queries_bucket", "bucket"), ("http_request_queries_count", "count")
        ]),
        ("job.overduration.bucket", [("job_overduration_bucket", "bucket"),
                                     ("job_overduration_count", "count")]),
    ],
)  # fmt: skip
def test_exposed_names(stored: str, names: list[tuple[str, str]]) -> None:
    assert exposed(stored) == names


def test_the_names_of_0_1_answer_when_named_and_are_not_listed() -> None:
    catalogue = Catalogue.of(["http.request.duration.bucket", "http.request.duration.sum_us"])
    assert catalogue.aliases == {
        "http_request_duration_bucket", "http_request_duration_count", "http_request_duration_sum"
    }  # fmt: skip
    assert catalogue.sources["http_request_duration_count"] == Source(
        "http.request.duration.bucket", "count"
    )
    assert catalogue.matching(parse("http_request_duration_count")) == [  # type: ignore[arg-type]
        "http_request_duration_count"
    ]
    wide = parse('{__name__=~"http_request_duration.*"}')
    assert sorted(catalogue.matching(wide)) == [  # type: ignore[arg-type]
        "http_request_duration_seconds_bucket",
        "http_request_duration_seconds_count",
        "http_request_duration_seconds_sum",
    ]
    assert [name for name, _ in catalogue.listed()] == [
        "http_request_duration_seconds_bucket",
        "http_request_duration_seconds_count",
        "http_request_duration_seconds_sum",
    ]


def test_an_alias_never_takes_a_name_that_answers() -> None:
    # a unique series is exposed under its legacy name, the one an alias would have
    catalogue = Catalogue.of(["http.request.duration.bucket"], ["http.request.duration.count"])
    assert catalogue.sources["http_request_duration_count"].unique
    assert "http_request_duration_count" not in catalogue.aliases


def test_collisions_are_reported_and_the_first_answers() -> None:
    catalogue = Catalogue.of(["a.b", "a_b", "c"])
    assert catalogue.sources["a_b_total"] == Source("a.b", "counter")
    assert catalogue.warnings == (
        "a.b, a_b all map to a_b_total: only a.b is answered under that name",
    )


def test_buckets_are_cumulative_over_every_bound_any_label_set_has() -> None:
    source = Source("h.bucket", "bucket")
    stored = [
        ('h.bucket{le="0.1",r="/a"}', {"le": "0.1", "r": "/a"}),
        ('h.bucket{le="1",r="/a"}', {"le": "1", "r": "/a"}),
        ('h.bucket{le="+Inf",r="/b"}', {"le": "+Inf", "r": "/b"}),
        ('h.bucket{le="0.5",r="/b"}', {"le": "0.5", "r": "/b"}),
        ('h.bucket{r="/c"}', {"r": "/c"}),  # no le: not a bucket of ours, ignored
    ]
    got = {(d.labels["r"], d.labels["le"]): d.parts for d in derive("h_bucket", source, stored)}
    a1, a2, b_inf, b5 = (s for s, _ in stored[:4])
    assert got == {
        ("/a", "0.1"): (a1,), ("/a", "0.5"): (a1,), ("/a", "1"): (a1, a2),
        ("/a", "+Inf"): (a1, a2),
        ("/b", "0.1"): (), ("/b", "0.5"): (b5,), ("/b", "1"): (b5,), ("/b", "+Inf"): (b5, b_inf),
    }  # fmt: skip
    counts = derive("h_count", Source("h.bucket", "count"), stored)
    assert sorted((d.labels["r"], len(d.parts)) for d in counts) == [("/a", 2), ("/b", 2)]
    (total,) = derive("h_sum", Source("h.sum_us", "sum"), [("h.sum_us", {})])
    assert total.scale == 1e-6 and total.labels == {"__name__": "h_sum"}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1700000000", 1_700_000_000),
        ("1700000000.123", 1_700_000_000.123),
        ("2023-11-14T22:13:20Z", 1_700_000_000),
        ("2023-11-14T22:13:20.5+01:00", 1_699_996_400.5),
    ],
)
def test_times(text: str, seconds: float) -> None:
    assert parse_time(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["yesterday", "2023-11-14", "2023-11-14T22:13:20", "nan", "1e30"])
def test_bad_times(text: str) -> None:
    with pytest.raises(ValueError, match=r"timestamp|time zone"):
        parse_time(text)


def test_steps_and_params() -> None:
    assert parse_step("15") == 15 and parse_step("0.5") == 0.5 and parse_step("1m30s") == 90
    params = Params([("match[]", "a"), ("time", "5"), ("match[]", "b"), ("time", "6")])
    assert params.all("match[]") == ["a", "b"]
    assert params.time("time") == 5  # the query string comes first, then the form
    with pytest.raises(BadData, match="'start': missing"):
        params.time("start")
    assert evaluation_times(100.5, 130, 10) == [100.5, 110.5, 120.5]


def choice(text: str, times: list[float], step: float | None) -> tuple[int, tuple[str, ...]]:
    made = choose(Settings(layout="book"), needs(parse(text)), times, step, NOW, 11_000)
    return made.precision, made.infos


def test_an_alert_at_now_reads_the_finest_covering_precision() -> None:
    assert choice("rate(x[1m])", [NOW], None)[0] == 1
    assert choice("rate(x[5m])", [NOW], None)[0] == 5  # 1 s slices keep 2 minutes
    assert choice("increase(x[1h])", [NOW], None)[0] == 60


def test_a_one_hour_dashboard() -> None:
    times = evaluation_times(NOW - 3600, NOW, 15)
    precision, infos = choice("sum(rate(x[1m0s]))", times, 15)
    assert precision == 60
    assert infos == (
        "answered from the slices of precision 60 s (2h retained)",
        "step 15s is not a multiple of the precision 60 s: values change once per slice",
    )


def test_windows_that_are_not_whole_slices_are_rounded_and_said() -> None:
    times = evaluation_times(NOW - 3600, NOW, 60)
    precision, infos = choice("rate(x[1m30s])", times, 60)
    assert precision == 60
    assert "range [1m30s] is not a whole number of 60 s slices: counted over [2m]" in infos
    _, infos = choice("rate(x[1m] offset 90s)", times, 60)
    assert any(
        info.startswith("offset 1m30s is not a whole number of 60 s slices") for info in infos
    )


def test_a_precision_dividing_the_windows_is_preferred() -> None:
    # 1 s slices cover both; 7 s windows are whole 1 s slices only
    assert choice("rate(x[7s])", evaluation_times(NOW - 60, NOW, 5), 5)[0] == 1
    assert choice("rate(x[10s])", evaluation_times(NOW - 60, NOW, 5), 5)[0] == 1


def test_nothing_covers_the_range() -> None:
    far = NOW - 400 * 86400
    precision, infos = choice("x", [far], None)
    assert precision == 86400
    assert "earlier times have no samples" in infos[1]


def test_needs_tell_windows_and_totals_apart() -> None:
    got = [(n.span, n.absolute) for n in needs(parse("rate(a[5m]) + b + max_over_time(c[1m])"))]
    assert sorted(got) == [(0.0, True), (60.0, True), (300.0, False)]


def test_an_instant_query_of_totals_reads_the_precision_kept_longest() -> None:
    assert choice("count(x)", [NOW], None)[0] == 86400
    assert choice("x - x offset 1h", [NOW], None)[0] == 86400
    assert choice("x + rate(x[1m])", [NOW], None)[0] == 1  # a window: its own precision
    assert choice("x", evaluation_times(NOW - 60, NOW, 15), 15)[0] == 1  # a graph: unchanged
    longest = Settings(precisions=(1, 60, 3600), retention="1=1000000,60=100,3600=100")
    assert choose(longest, needs(parse("x")), [NOW], None, NOW, 11_000).precision == 1


def grouping(
    text: str, start: float, step: float | None, layout: str = "blocks"
) -> tuple[int, int]:
    """(the precision read, the precision evaluated) of a query over ``start``..NOW."""
    times = evaluation_times(start, NOW, step) if step else [NOW]
    made = choose(Settings(layout=layout), needs(parse(text)), times, step, NOW, 10**7)
    return made.read_precision, made.precision


def test_blocks_evaluate_a_dashboard_on_sums_of_whole_stored_slices() -> None:
    # NOW - 3600 and NOW - 300 are multiples of 15; NOW - 86400 is one of 15, not of 120
    assert grouping("sum(rate(x[1m0s]))", NOW - 3600, 15) == (5, 15)
    assert grouping("sum by (le) (increase(x[1m]))", NOW - 300, 15) == (5, 15)  # not 1 s: fewer
    assert grouping("histogram_quantile(0.9, sum by (le) (rate(x[2m15s])))", NOW - 86400, 120) == (
        5, 15,
    )  # fmt: skip
    assert grouping("rate(x[30m]) / rate(y[30m] offset 30m)", NOW - 7230, 1800) == (60, 1800)
    # a frame of 720 slices holds whole sums: 7 does not divide it
    assert grouping("rate(x[7s])", NOW - 2 - 7 * 20, 7) == (1, 1)


@pytest.mark.parametrize(
    ("text", "start", "step"),
    [
        ("irate(x[1m])", NOW - 3600, 15),  # the last slice of a window: a stored one
        ("count_over_time(x[1m])", NOW - 3600, 15),  # the number of slices
        ("max_over_time(x[1m])", NOW - 3600, 15),
        ("x", NOW - 3600, 15),  # running totals since the oldest slice kept
        ("rate(x[1m])", NOW - 3600 + 5, 15),  # times between two sums
        ("rate(x[1m] offset 5s)", NOW - 3600, 15),
        ("rate(x[1m])", NOW, None),  # one time: its own slices
    ],
)
def test_only_windows_of_whole_sums_are_evaluated_on_sums(
    text: str, start: float, step: float | None
) -> None:
    read, evaluated = grouping(text, start, step)
    assert read == evaluated
    assert grouping("sum(rate(x[1m0s]))", NOW - 3600, 15, "book") == (60, 60)
