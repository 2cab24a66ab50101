"""The built-in page's Explore tab in a real headless Chromium (Debian's, driven by playwright)
against a datasource serving known data on 127.0.0.1 (the overview: test_overview.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.store import Store
from tests.datasource.chromium import launch, needs_chromium
from tests.serving import serving

pytestmark = [pytest.mark.slow, needs_chromium]


@pytest.fixture
def served(settings: Settings, store: Store) -> Iterator[str]:
    now = int(time.time())
    batch = {
        f'http.requests{{method="GET",route="/{r}",status="{s}"}}': {
            t: 1 + (t + i) % 3 for t in range(now - 3600, now + 1, 2)
        }
        for i, (r, s) in enumerate((("a", "200"), ("b", "200"), ("a", "500")))
    }
    for le, n in (("0.05", 5), ("0.5", 3), ("+Inf", 1)):
        batch[f'http.request.duration.bucket{{le="{le}",method="GET",route="/a"}}'] = {
            t: n for t in range(now - 3600, now + 1, 10)
        }
    store.apply(batch)
    with serving(create_app(settings)) as port:
        yield f"http://127.0.0.1:{port}/"


def test_the_page_lists_metrics_draws_and_follows_the_precision(
    served: str, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = launch(playwright)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(served + "?tab=explore")

        page.wait_for_function("document.querySelectorAll('#metric option').length > 0")
        options = page.eval_on_selector_all("#metric option", "els => els.map(e => e.value)")
        assert "http.requests" in options and "http.request.duration" in options
        assert "http.request.duration.bucket" not in options  # histogram parts stay hidden

        page.select_option("#metric", "http.requests")
        page.wait_for_function(  # this metric's query run (the previous one's chart is drawn)
            "() => { const c = window.slicecount.explore.chart;"
            " return (window.slicecount.state.q || '').includes('rate(http.requests)')"
            " && !window.slicecount.busy"
            " && c && c.data.length > 1 && c.data[1].some(v => v != null && v > 0); }"
        )
        assert "rate(http.requests)" in page.input_value("#query")
        assert "rate(http.requests)" in unquote(page.url)  # the query is in the URL...
        page.reload()
        page.wait_for_function("() => window.slicecount.explore.chart !== null")
        assert "rate(http.requests)" in page.input_value("#query")  # ...and comes back from it
        assert page.eval_on_selector("#chart canvas", "c => c.width") > 0

        def slice_width() -> float:
            return float(page.evaluate("() => { const x = window.slicecount.explore.chart.data[0];"
                                       " return x[1] - x[0]; }"))  # fmt: skip

        page.select_option("#precision", "60")
        page.wait_for_function("() => { const x = window.slicecount.explore.chart.data[0];"
                               " return x.length > 1 && x[1] - x[0] === 60; }")  # fmt: skip
        assert slice_width() == 60
        page.select_option("#range", "900")
        page.select_option("#precision", "5")
        page.wait_for_function("() => { const x = window.slicecount.explore.chart.data[0];"
                               " return x.length > 1 && x[1] - x[0] === 5; }")  # fmt: skip
        assert slice_width() == 5

        page.select_option("#metric", "http.request.duration")
        page.wait_for_function(
            "() => { const f = window.slicecount.explore.frames;"
            " return f && f.length === 3 && f[0].target.startsWith('p50'); }"
        )
        assert "histogram_quantile(0.95" in page.input_value("#query")
        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
        browser.close()
    assert (tmp_path / "page.png").stat().st_size > 10_000
    assert errors == []
