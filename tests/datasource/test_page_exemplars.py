"""The built-in page marks exemplars on its latency chart, each a link to its trace through the
setting trace_url, in a real headless Chromium (Debian's, driven by playwright)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.datasource.chromium import DRAWN, launch, needs_chromium, open_page
from tests.serving import serving

pytestmark = [pytest.mark.slow, needs_chromium]

TEMPLATE = "http://jaeger.example:16686/trace/${__value.raw}?from=slicecount"
MINUTES = 20


def traced(store: Store, now: float) -> list[str]:
    """A traced request a minute on /a, one slow one on /b: their trace ids, oldest first."""
    recorder = Recorder(store, flush_interval=3600, clock=lambda: now)
    ids = []
    for minute in range(MINUTES):
        trace_id = f"{minute + 1:032x}"
        at = now - (MINUTES - minute) * 60
        for _ in range(20):  # untraced beside it: the latency lines have points
            recorder.observe("http.request.duration", 0.04, {"method": "GET", "route": "/a"},
                             now=at)  # fmt: skip
        recorder.observe(
            "http.request.duration", 0.02 + minute / 1000, {"method": "GET", "route": "/a"},
            exemplar={"trace_id": trace_id, "span_id": f"{minute + 1:016x}"}, now=at,
        )  # fmt: skip
        recorder.add("http.requests", 21, {"method": "GET", "route": "/a", "status": 200}, at)
        ids.append(trace_id)
    slow = f"{999:032x}"
    recorder.observe("http.request.duration", 2.0, {"method": "GET", "route": "/b"},
                     exemplar={"trace_id": slow, "span_id": "1" * 16}, now=now - 30)  # fmt: skip
    recorder.add("http.requests", 1, {"method": "GET", "route": "/b", "status": 200}, now - 30)
    assert recorder.flush()
    recorder.close()
    return [*ids, slow]


@pytest.fixture
def sent(store: Store) -> list[str]:
    return traced(store, time.time())


@pytest.fixture
def served(settings: Settings, sent: list[str]) -> Iterator[str]:
    with serving(create_app(settings.with_changes(trace_url=TEMPLATE))) as port:
        yield f"http://127.0.0.1:{port}/"


def test_the_latency_chart_marks_exemplars_linking_to_their_traces(
    served: str, sent: list[str]
) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        page, watched = open_page(browser, served)
        page.goto(served + "?range=3600&refresh=0")
        page.wait_for_function(DRAWN)
        page.wait_for_function(
            f"() => document.querySelectorAll('#panel-latency .exemplar').length >= {MINUTES + 1}",
            polling=100,
        )
        dots = page.eval_on_selector_all(
            "#panel-latency .exemplar",
            "ds => ds.map((d) => [d.tagName, d.dataset.trace, d.getAttribute('href')])",
        )
        assert sorted(trace for _, trace, _ in dots) == sorted(sent)
        for tag, trace, href in dots:
            assert tag == "A" and href == TEMPLATE.replace("${__value.raw}", trace)
        # no other chart has them, and the dots are on the chart (the slow one too)
        assert page.eval_on_selector_all(".exemplar", "ds => ds.length") == len(sent)
        inside = page.eval_on_selector_all(
            "#panel-latency .exemplar",
            "ds => ds.every((d) => { const o = d.parentElement.getBoundingClientRect(),"
            " r = d.getBoundingClientRect(); return r.top >= o.top - 6 && r.bottom <= o.bottom + 6"
            " && r.left >= o.left - 6 && r.right <= o.right + 6; })",
        )
        assert inside
        # a route's view asks for that route's alone
        page.goto(served + "?route=%2Fb&range=3600&refresh=0")
        page.wait_for_function(
            "() => document.querySelectorAll('#panel-latency .exemplar').length === 1"
        )
        (trace,) = page.eval_on_selector_all(
            "#panel-latency .exemplar", "ds => ds.map((d) => d.dataset.trace)"
        )
        assert trace == sent[-1]
        assert any("/api/v1/query_exemplars?" in url for url in watched.urls)
        assert watched.outside() == [] and watched.errors == []
        browser.close()


def test_without_trace_url_the_dots_show_their_trace_and_link_nowhere(
    settings: Settings, sent: list[str]
) -> None:
    from playwright.sync_api import sync_playwright

    with serving(create_app(settings)) as port, sync_playwright() as playwright:
        browser = launch(playwright)
        page, watched = open_page(browser, f"http://127.0.0.1:{port}/")
        page.goto(f"http://127.0.0.1:{port}/?range=3600&refresh=0")
        page.wait_for_function(
            f"() => document.querySelectorAll('#panel-latency .exemplar').length >= {MINUTES + 1}",
            polling=100,
        )
        tags = page.eval_on_selector_all(
            "#panel-latency .exemplar", "ds => ds.map((d) => [d.tagName, d.title])"
        )
        assert {tag for tag, _ in tags} == {"SPAN"}
        assert all("no trace_url set" in title and "trace " in title for _, title in tags)
        assert watched.errors == []
        browser.close()
