"""Edges of the overview (issue 16, found in review): the built-in page in a real headless
Chromium against a datasource on 127.0.0.1 — routes whose names need escaping, HTML in route
names and annotations, Redis down, a 4xx message, the Explore tab under auto-refresh, drag to
zoom across synced charts, an app with many routes, a slow answer overtaken by a newer view."""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import pytest

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.core.series import encode
from slicecount.store import Store
from tests.datasource import overview_data
from tests.datasource.chromium import (
    DRAWN,
    POINTS,
    browsing,
    drag,
    needs_chromium,
    open_page,
    refreshes,
)

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.slow, needs_chromium]

XSS = '<img src=x onerror="window.pwned=1">'
SPECIAL = ["<unmatched>", "/a.b", "/aXb", "/items/{id}", '/q"uote', "/back\\slash", XSS]
"""Routes whose names need escaping in a query, in the URL or in HTML."""


def write_special(store: Store, now: int) -> None:
    """Two requests a minute to each special route (plus their duration buckets), and an
    annotation whose text is HTML."""
    batch: dict[str, dict[int, int]] = {}
    for i, route in enumerate(SPECIAL):
        labels = {"method": "GET", "route": route, "status": "200"}
        batch[encode("http.requests", labels)] = {t: 2 + i for t in range(now - 1800, now - 60, 60)}
        bucket = {"le": "0.1", "method": "GET", "route": route}
        batch[encode("http.request.duration.bucket", bucket)] = {
            t: 2 + i for t in range(now - 1800, now - 60, 60)
        }
    store.apply(batch)
    store.annotate(XSS, tags=["<b>deploy</b>"], when=now - 900)


def route_view(page: Page, route: str) -> None:
    """Click the route's row and wait for its view to be drawn."""
    done = refreshes(page)
    rows = page.locator("#routes tbody tr")
    names = page.evaluate("() => window.slicecount.overview.rows.map((r) => r.route)")
    rows.nth(names.index(route)).locator("a").click()
    page.wait_for_function(
        "([route, done]) => window.slicecount.state.route === route"
        " && window.slicecount.refreshes > done && !window.slicecount.busy",
        arg=[route, done],
    )


def test_routes_needing_escapes_drill_down_and_round_trip(settings: Settings, store: Store) -> None:
    now = int(time.time())
    write_special(store, now)
    with browsing(settings) as (browser, base):
        page, watched = open_page(browser, base)
        page.goto(base)
        page.wait_for_function(DRAWN)
        shown = page.eval_on_selector_all(
            "#routes tbody tr td:first-child", "tds => tds.map((t) => t.textContent)"
        )
        assert sorted(shown) == sorted(SPECIAL)  # as text, never as HTML
        for route in SPECIAL:
            route_view(page, route)
            assert page.evaluate("() => window.slicecount.error") == ""
            assert page.text_content("#crumbs strong") == route
            assert parse_qs(urlsplit(page.url).query) == {"route": [route]}
            # exactly this route's requests: 2 + i a minute, no other route matched
            rate = page.evaluate("() => window.slicecount.overview.charts.requests.plot.data[1]"
                                 ".filter((v) => v > 0)[0]")  # fmt: skip
            assert rate == pytest.approx((2 + SPECIAL.index(route)) / 60), route
            page.reload()
            page.wait_for_function(DRAWN)
            assert page.text_content("#crumbs strong") == route
            page.goto(base)
            page.wait_for_function(DRAWN)
        assert page.evaluate("() => window.pwned") is None
        assert page.eval_on_selector_all("img", "is => is.length") == 0
        marks = page.eval_on_selector_all(".panel .annotation", "ms => ms.map((m) => m.title)")
        assert marks and all(XSS in m for m in marks)  # the text shown, as text
        assert watched.errors == [] and watched.outside() == []


def test_redis_down_shows_the_datasources_message(settings: Settings) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nothing listens there once closed
    down = Settings(redis_url=f"redis://127.0.0.1:{dead}/0")
    with browsing(down) as (browser, base):
        page, watched = open_page(browser, base)
        page.goto(base)
        page.wait_for_selector("#message", state="visible", timeout=15_000)
        assert "redis unavailable" in (page.text_content("#message") or "")
        assert page.is_hidden("#empty-state")  # not "no data yet": the store did not answer
        assert [e for e in watched.errors if "503" not in e] == []


def test_a_bad_explore_query_shows_the_servers_message(settings: Settings, store: Store) -> None:
    overview_data.write(store, int(time.time()))
    with browsing(settings) as (browser, base):
        page, watched = open_page(browser, base)
        page.goto(base + "?tab=explore&q=rate(http.requests")
        page.wait_for_selector("#message", state="visible")
        text = page.text_content("#message") or ""
        assert "400" not in text and "expected" in text  # the server's words, not a status
        assert [e for e in watched.errors if "400" not in e] == []


def test_explore_auto_refresh_keeps_what_the_user_is_typing(
    settings: Settings, store: Store
) -> None:
    overview_data.write(store, int(time.time()))
    with browsing(settings) as (browser, base):
        page, watched = open_page(browser, base)
        page.goto(base + "?tab=explore&refresh=1&q=" + "sum(rate(http.requests))")
        page.wait_for_function("() => window.slicecount.explore.chart !== null")
        page.fill("#query", "sum by (route) (rate(http.requ")  # typing, not submitted yet
        done = refreshes(page)
        page.wait_for_function(f"() => window.slicecount.refreshes > {done + 1}")
        assert page.input_value("#query") == "sum by (route) (rate(http.requ"
        # the half-typed query is not run on each tick: no error, the URL's query is drawn
        assert page.evaluate("() => window.slicecount.error") == ""
        assert watched.queries[-1]["targets"][0]["target"] == "sum(rate(http.requests))"


def test_explore_filter_matches_the_value_exactly(settings: Settings, store: Store) -> None:
    now = int(time.time())
    write_special(store, now)
    with browsing(settings) as (browser, base):
        page, _ = open_page(browser, base)
        page.goto(base + "?tab=explore")
        page.wait_for_function("document.querySelectorAll('#metric option').length > 0")
        page.select_option("#metric", "http.requests")
        page.wait_for_function("() => [...document.querySelectorAll('#filter-label option')]"
                               ".some((o) => o.value === 'route')")  # fmt: skip
        page.select_option("#filter-label", "route")
        for route in ["/a.b", '/q"uote']:
            page.select_option("#filter-value", route)
            page.wait_for_function(
                "(route) => (window.slicecount.explore.frames || []).length > 0"
                " && !window.slicecount.busy && window.slicecount.state.q.includes('route')",
                arg=route,
            )
            page.wait_for_function("() => !window.slicecount.busy")
            assert page.evaluate("() => window.slicecount.error") == "", route
            frames = page.evaluate("() => window.slicecount.explore.frames.length")
            rate = page.evaluate("() => window.slicecount.explore.chart.data[1]"
                                 ".filter((v) => v > 0)[0]")  # fmt: skip
            # /a.b alone, not /aXb too; a quote in the value does not end the query's string
            assert frames == 1 and rate == pytest.approx((2 + SPECIAL.index(route)) / 60), route


def test_a_drag_zoom_leaves_no_selection_on_the_other_charts(
    settings: Settings, store: Store
) -> None:
    overview_data.write(store, int(time.time()))
    with browsing(settings) as (browser, base):
        page, _ = open_page(browser, base)
        page.goto(base)
        page.wait_for_function(DRAWN)
        done = refreshes(page)
        drag(page, "latency")
        page.wait_for_function(
            f"() => window.slicecount.refreshes > {done} && !window.slicecount.busy"
        )
        selections = page.evaluate(
            "() => Object.fromEntries(Object.entries(window.slicecount.overview.charts)"
            ".filter(([, c]) => c.plot).map(([id, c]) => [id, c.plot.select.width]))"
        )
        assert all(w == 0 for w in selections.values()), selections


@pytest.mark.parametrize("max_series", [None, 100])
def test_an_app_with_many_routes_still_gets_its_overview(
    settings: Settings, store: Store, max_series: int | None
) -> None:
    """45 routes, one method each, the default 12 duration buckets: 540 bucket series. Within
    the default limits everything draws; past a limit (here 100 series a target) the latency
    targets are left out, the rest draws and the latency panel says why."""
    now = int(time.time())
    batch: dict[str, dict[int, int]] = {}
    les = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"]
    for r in range(45):
        points = {t: 1 for t in range(now - 1800, now - 60, 30)}
        batch[f'http.requests{{method="GET",route="/r{r}",status="200"}}'] = points
        for le in les:
            batch[f'http.request.duration.bucket{{le="{le}",method="GET",route="/r{r}"}}'] = points
    store.apply(batch)
    limits = None if max_series is None else Limits(max_series=max_series)
    with browsing(settings, limits) as (browser, base):
        page, watched = open_page(browser, base)
        page.goto(base)
        page.wait_for_function("() => window.slicecount.refreshes > 0 || window.slicecount.error",
                               timeout=15_000)  # fmt: skip
        drawn = page.evaluate(POINTS)
        assert drawn["requests"] >= 20, page.evaluate("() => window.slicecount.error")
        assert page.eval_on_selector_all("#routes tbody tr", "trs => trs.length") == 45
        said = page.text_content("#panel-latency .empty") or ""
        if max_series is None:
            assert drawn["latency"] >= 20
        else:
            assert said.startswith("Not drawn: ") and "100 series" in said, said
            p95 = page.eval_on_selector_all(
                "#routes tbody tr td:nth-child(4)", "t => t.map(c => c.textContent)"
            )
            assert set(p95) == {"\u2013"}  # an en dash: no figure
        refused = "the server responded with a status of 422"  # Chromium logs the first try
        assert [e for e in watched.errors if refused not in e] == []


def test_an_older_answer_is_not_drawn_over_a_newer_view(settings: Settings, store: Store) -> None:
    overview_data.write(store, int(time.time()))
    with browsing(settings) as (browser, base):
        page, _ = open_page(browser, base + "?refresh=0")
        page.goto(base + "?refresh=0")
        page.wait_for_function(DRAWN)

        def slow(route: object) -> None:  # the /login view's answer arrives late
            body = route.request.post_data or ""  # type: ignore[attr-defined]
            if "/login" in body:
                time.sleep(1.5)
            route.continue_()  # type: ignore[attr-defined]

        page.route("**/query", slow)
        page.evaluate("() => document.querySelector(\"#routes tr[data-route='/login'] a\").click()")
        page.evaluate(
            "() => document.querySelector(\"#routes tr[data-route='/api/items'] a\").click()"
        )
        page.wait_for_timeout(3000)
        assert page.evaluate("() => window.slicecount.state.route") == "/api/items"
        assert page.text_content("#crumbs strong") == "/api/items"
        labels = page.evaluate("() => window.slicecount.overview.charts.requests.plot.series"
                               ".slice(1).map((s) => s.label)")  # fmt: skip
        assert labels == ["GET 200", "GET 500"]


def test_navigating_does_not_pile_up_refresh_timers(settings: Settings, store: Store) -> None:
    overview_data.write(store, int(time.time()))
    with browsing(settings) as (browser, base):
        page, watched = open_page(browser, base)
        page.goto(base + "?refresh=1")
        page.wait_for_function(DRAWN)
        for _ in range(5):
            # click until the view changes: a refresh may be redrawing the table (its rows
            # replaced) at the moment of a single click
            page.wait_for_function(
                "() => { if (window.slicecount.state.route === '/login') return true;"
                " document.querySelector(\"#routes tr[data-route='/login'] a\")?.click();"
                " return false; }"
            )
            page.go_back()
            page.wait_for_function("() => !window.slicecount.state.route")
            page.wait_for_selector("#routes tbody tr", state="visible")
        page.wait_for_function("() => !window.slicecount.busy")
        before = len(watched.queries)
        page.wait_for_timeout(3200)
        assert len(watched.queries) - before <= 4  # one a second


def test_the_drill_down_paints_5xx_red_and_2xx_green(settings: Settings, store: Store) -> None:
    overview_data.write(store, int(time.time()))
    with browsing(settings) as (browser, base):
        page, _ = open_page(browser, base)
        page.goto(base + "?route=/api/items")
        page.wait_for_function(DRAWN)
        colours = page.evaluate(
            "() => Object.fromEntries(window.slicecount.overview.charts.requests.plot.series"
            ".slice(1).map((s) => [s.label, s._stroke]))"
        )
        assert colours == {"GET 200": "#2da44e", "GET 500": "#cf222e"}


def test_explore_on_an_empty_store_says_there_is_no_data_yet(settings: Settings) -> None:
    with browsing(settings) as (browser, base):
        page, watched = open_page(browser, base)
        page.goto(base + "?tab=explore")
        page.wait_for_function(DRAWN)
        assert "no" in (page.text_content("#explore-message") or "").lower()
        assert watched.errors == []
