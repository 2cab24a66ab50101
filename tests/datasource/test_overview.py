"""The built-in page's overview in a real headless Chromium (Debian's, driven by playwright)
against a datasource serving known traffic on 127.0.0.1: every chart draws, the routes table
holds the figures computed from the data, a route drills down, the URL holds the state, one
/query per refresh, nothing but the service is asked, light and dark at laptop and phone width.

``SLICECOUNT_README_SCREENSHOT=docs/overview.png`` also writes the README's screenshot."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import pytest

from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.store import Store
from tests.datasource import overview_data
from tests.datasource.chromium import (
    DRAWN,
    POINTS,
    drag,
    launch,
    needs_chromium,
    open_page,
    refreshes,
    wait_refreshed,
)
from tests.serving import serving

if TYPE_CHECKING:
    pass

pytestmark = [pytest.mark.slow, needs_chromium]

PANELS = ["requests", "errors", "latency", "db-rate", "db-per-request", "throttled", "clients"]


@pytest.fixture
def now() -> int:
    return int(time.time())


@pytest.fixture
def served(settings: Settings, store: Store, now: int) -> Iterator[str]:
    overview_data.write(store, now)
    with serving(create_app(settings)) as port:
        yield f"http://127.0.0.1:{port}/"


def test_the_overview_draws_every_chart_and_the_routes_table(
    served: str, now: int, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        page, watched = open_page(browser, served)
        page.goto(served)  # no typing: the overview is what opens
        page.wait_for_function(DRAWN)
        load_ms = float(page.evaluate("() => window.slicecount.drawnAt"))

        points = page.evaluate(POINTS)
        assert all(points[p] >= 20 for p in PANELS), points  # 48 minutes of 60 s slices
        labels = page.evaluate("() => window.slicecount.overview.charts.requests.plot.series"
                               ".slice(1).map((s) => s.label)")  # fmt: skip
        assert labels == ["2xx", "4xx", "5xx"]
        # gaps as gaps: no quantile and no error ratio where no request was seen (the data
        # starts 50 minutes ago), and no line drawn across them
        gaps = page.evaluate(
            "() => ['latency', 'errors'].map((id) => { const p = window.slicecount.overview"
            ".charts[id].plot; return [p.data[1].includes(null), p.series[1].spanGaps]; })"
        )
        assert gaps == [[True, False], [True, False]]
        # each chart shows the deploy, with its text on hover
        marks = page.eval_on_selector_all(".panel .annotation", "ms => ms.map((m) => m.title)")
        assert len(marks) == len(PANELS) and all(overview_data.DEPLOY in m for m in marks)
        # units on every axis
        axes = page.evaluate("() => Object.values(window.slicecount.overview.charts)"
                             ".filter((c) => c.plot).map((c) => c.plot.axes[1].label)")  # fmt: skip
        assert all(axes) and "per second" in axes and "seconds" in axes and "percent" in axes

        seconds = 3600.0  # the default range: the last hour
        expected = overview_data.expected_rows(now, seconds)
        shown = page.evaluate("() => window.slicecount.overview.rows"
                              ".map(({spark, ...r}) => r)")  # fmt: skip
        assert [r["route"] for r in shown] == [r.route for r in expected]  # traffic order
        for row, want in zip(shown, expected, strict=True):
            assert row["requests"] == want.requests
            assert row["rate"] == pytest.approx(want.rate, rel=1e-9)
            assert row["errorRatio"] == pytest.approx(want.error_ratio, rel=1e-9)
            assert row["p95"] == pytest.approx(want.p95, rel=1e-9)
        cells = page.eval_on_selector_all(
            "#routes tbody tr",
            "trs => trs.map((tr) => [...tr.cells].slice(0, 4).map((c) => c.textContent))",
        )
        assert cells == [
            ["/api/items", "0.27/s", "10 %", "275 ms"],  # 960 requests, 96 of them 500
            ["/login", "0.12/s", "0 %", "47 ms"],  # 429s are not errors of the app
            ["/reports/{id}", "0.01/s", "0 %", "950 ms"],  # all in the bucket up to 1 s
        ]
        sparks = page.eval_on_selector_all(
            "#routes svg.spark", "s => s.map((e) => +e.dataset.points)"
        )
        assert len(sparks) == 3 and all(n >= 20 for n in sparks)

        # one /query per refresh, every panel's target in it; nothing else is asked
        page.goto(served + "?refresh=1")
        page.wait_for_function("() => window.slicecount && window.slicecount.refreshes >= 4")
        page.evaluate("() => clearInterval(window.slicecount.timer)")
        page.wait_for_function("() => !window.slicecount.busy")
        count = refreshes(page)
        sent = [q for q in watched.queries if q.get("targets")]
        first_visit = 1
        assert len(sent) == first_visit + count
        assert all(len(q["targets"]) == 17 for q in sent)  # the task panels' 5 among them
        assert set(watched.posts) == {"/query"}  # no /metrics: the overview needs no discovery
        assert watched.outside() == []
        assert watched.errors == []
        page.context.close()

        for width in (1280, 390):
            for scheme in ("light", "dark"):
                shot, seen = open_page(browser, served, width, scheme)
                shot.goto(served)
                shot.wait_for_function(DRAWN)
                path = tmp_path / f"overview-{width}-{scheme}.png"
                shot.screenshot(path=str(path), full_page=True)
                assert path.stat().st_size > 20_000
                if width == 390:  # a phone: the page fits, nothing wider than the screen
                    assert shot.evaluate("() => document.documentElement.scrollWidth") <= 390
                readme = os.environ.get("SLICECOUNT_README_SCREENSHOT")
                if readme and width == 1280 and scheme == "light":
                    shot.screenshot(path=readme, full_page=True)
                assert seen.errors == [] and seen.outside() == []
                shot.context.close()
        browser.close()
    (tmp_path / "measured.json").write_text(
        json.dumps({"load_ms": load_ms, "refreshes": count, "queries": len(sent)})
    )
    print(
        f"overview drawn {load_ms:.0f} ms after navigation; {count} refreshes, {len(sent)} /query"
    )


def test_a_route_drills_down_zooms_and_the_url_round_trips(served: str, now: int) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        page, watched = open_page(browser, served)
        page.goto(served)
        page.wait_for_function(DRAWN)

        done = refreshes(page)
        page.click("#routes tbody tr[data-route='/api/items'] a")
        wait_refreshed(page, done)
        assert parse_qs(urlsplit(page.url).query) == {"route": ["/api/items"]}
        assert page.text_content("#crumbs strong") == "/api/items"
        assert page.is_hidden("#routes-section")
        labels = page.evaluate("() => window.slicecount.overview.charts.requests.plot.series"
                               ".slice(1).map((s) => s.label)")  # fmt: skip
        assert labels == ["GET 200", "GET 500"]  # by method and status
        points = page.evaluate(POINTS)
        assert all(points[p] >= 20 for p in ["requests", "errors", "latency", "db-rate",
                                              "db-per-request", "clients"]), points  # fmt: skip
        assert page.is_hidden("#panel-throttled")  # nothing throttled on this route
        targets = [t["target"] for t in watched.queries[-1]["targets"]]
        assert 'sum by (method, status) (rate(http.requests{route="/api/items"}))' in targets

        # a reload restores the view from the URL
        page.reload()
        page.wait_for_function(DRAWN)
        assert page.text_content("#crumbs strong") == "/api/items"
        assert page.evaluate("() => window.slicecount.state.route") == "/api/items"

        # drag on a chart to zoom: a fixed range in the URL, refresh off
        done = refreshes(page)
        drag(page, "latency")
        wait_refreshed(page, done)
        query = parse_qs(urlsplit(page.url).query)
        assert query["route"] == ["/api/items"] and "from" in query and "to" in query
        zoomed_from, zoomed_to = int(query["from"][0]), int(query["to"][0])
        assert now * 1000 - 3_700_000 < zoomed_from < zoomed_to < (now + 60) * 1000
        assert page.is_visible("#unzoom") and page.is_disabled("#refresh")
        scale = page.evaluate("() => { const x = window.slicecount.overview.charts.latency.plot"
                              ".scales.x; return [x.min, x.max]; }")  # fmt: skip
        assert zoomed_from / 1000 - 60 <= scale[0] and scale[1] <= zoomed_to / 1000 + 60

        # back: unzoomed; back again: the overview; forward: the route
        page.go_back()
        page.wait_for_function("() => window.slicecount.state.from === null")
        assert parse_qs(urlsplit(page.url).query) == {"route": ["/api/items"]}
        page.go_back()
        page.wait_for_function("() => window.slicecount.state.route === ''")
        page.wait_for_selector("#routes tbody tr", state="visible")
        page.go_forward()
        page.wait_for_function("() => window.slicecount.state.route === '/api/items'")

        # the Explore tab is one click away, and keeps the query language
        page.click("#tab-explore")
        page.wait_for_function("() => window.slicecount.explore.chart !== null")
        assert "tab=explore" in page.url
        assert watched.outside() == [] and watched.errors == []
        browser.close()


def test_the_page_asks_for_the_token_and_uses_it(redis_url: str, store: Store, now: int) -> None:
    from playwright.sync_api import sync_playwright

    overview_data.write(store, now)
    with serving(create_app(Settings(redis_url=redis_url, token="s3cret"))) as port, \
            sync_playwright() as playwright:  # fmt: skip
        base = f"http://127.0.0.1:{port}/"
        browser = launch(playwright)
        page, watched = open_page(browser, base)
        page.goto(base)
        page.wait_for_selector("#token-form", state="visible")
        assert "needs its token" in (page.text_content("#token-reason") or "")
        page.fill("#token", "wrong")
        page.click("#token-form button")
        page.wait_for_function("() => document.getElementById('token-reason').textContent"
                               ".includes('refused')")  # fmt: skip
        page.fill("#token", "s3cret")
        page.click("#token-form button")
        page.wait_for_function(DRAWN)
        assert page.is_hidden("#token-form")
        assert len(page.eval_on_selector_all("#routes tbody tr", "trs => trs")) == 3
        # the browser logs each 401 it got; nothing else
        assert [e for e in watched.errors if "401" not in e] == []
        assert watched.outside() == []
        browser.close()


def test_an_empty_store_says_there_is_no_data_yet(settings: Settings) -> None:
    from playwright.sync_api import sync_playwright

    with serving(create_app(settings)) as port, sync_playwright() as playwright:
        base = f"http://127.0.0.1:{port}/"
        browser = launch(playwright)
        page, watched = open_page(browser, base)
        page.goto(base)
        page.wait_for_function(DRAWN)
        said = page.text_content("#empty-state") or ""
        assert "No requests or task runs recorded in this range yet" in said
        assert page.is_visible("#empty-state") and page.is_hidden("#routes-section")
        assert page.eval_on_selector_all(".panel:not([hidden])", "ps => ps.length") == 0
        assert watched.errors == []
        browser.close()


def test_a_workers_task_runs_draw_their_panels(settings: Settings, store: Store, now: int) -> None:
    """A store holding only task runs (a Celery or RQ worker's): the page draws the task
    panels, says nothing is missing, and shows no empty request panels."""
    from playwright.sync_api import sync_playwright

    from slicecount.core.series import encode
    from slicecount.workers.runs import RunMapping

    mapping = RunMapping(encode)
    batch: dict[str, dict[int, int]] = {}
    for t in range(now - 1800, now, 30):
        for task, queue, state, seconds in (
            ("send_mail", "mail", "succeeded", 0.2),
            ("send_mail", "mail", "failed", 1.5),
            ("report", "reports", "succeeded", 12.0),
        ):
            for series, n in mapping.entries(task, queue, state, seconds, 0.5):
                batch.setdefault(series, {})[t] = n
    store.apply(batch)
    with serving(create_app(settings)) as port, sync_playwright() as playwright:
        base = f"http://127.0.0.1:{port}/"
        browser = launch(playwright)
        page, watched = open_page(browser, base)
        page.goto(base)
        page.wait_for_function(DRAWN)
        shown = page.eval_on_selector_all(".panel:not([hidden])", "ps => ps.map((p) => p.id)")
        assert shown == ["panel-task-runs", "panel-task-duration", "panel-task-wait"]
        assert page.is_hidden("#empty-state") and page.is_hidden("#routes-section")
        labels = page.evaluate("() => window.slicecount.overview.charts['task-runs'].plot.series"
                               ".slice(1).map((s) => s.label)")  # fmt: skip
        assert labels == ["failed", "succeeded"]
        assert watched.errors == []
        browser.close()
