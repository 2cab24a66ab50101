"""Debian's Chromium for the page tests (driven by playwright, no browser download): where it
is, the mark that skips a test without it, a launch that makes no request of its own, and a
page whose requests and console errors are watched."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.app import create_app
from tests.serving import serving

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright, Request

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium on PATH: install Debian's chromium (apt-get install chromium); "
    ".ci/run does",
)
ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
"""Chromium's own traffic (updates, sync, safe browsing) off: what the test sees is the page's."""


def launch(playwright: Playwright) -> Browser:
    return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)


DRAWN = "() => window.slicecount && window.slicecount.refreshes > 0"
POINTS = """() => Object.fromEntries(Object.entries(window.slicecount.overview.charts).map(
  ([id, c]) => [id, document.getElementById('panel-' + id).hidden || !c.plot ? 0
    : c.plot.data.slice(1).reduce((n, s) => n + s.filter((v) => v != null).length, 0)]))"""


@dataclass
class Watched:
    """What a page did: every request's URL, its /query bodies, its console errors."""

    base: str
    urls: list[str] = field(default_factory=list)
    queries: list[dict[str, Any]] = field(default_factory=list)
    posts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def request(self, request: Request) -> None:
        self.urls.append(request.url)
        if request.method == "POST":
            self.posts.append(urlsplit(request.url).path)
            if request.url.endswith("/query"):
                self.queries.append(json.loads(request.post_data or "{}"))

    def outside(self) -> list[str]:
        """Requests to anything but the service (data: URLs are not requests to a host)."""
        return [u for u in self.urls if not u.startswith(self.base) and not u.startswith("data:")]


def open_page(
    browser: Browser, base: str, width: int = 1280, scheme: str = "light"
) -> tuple[Page, Watched]:
    context = browser.new_context(
        viewport={"width": width, "height": 900},
        color_scheme=scheme,  # type: ignore[arg-type]
    )
    page = context.new_page()
    watched = Watched(base)
    page.on("request", watched.request)
    page.on("console", lambda m: watched.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: watched.errors.append(str(e)))
    return page, watched


def wait_refreshed(page: Page, after: int) -> None:
    page.wait_for_function(
        f"() => window.slicecount.refreshes > {after} && !window.slicecount.busy"
    )


def refreshes(page: Page) -> int:
    return int(page.evaluate("() => window.slicecount.refreshes"))


@contextmanager
def browsing(settings: Settings, limits: Limits | None = None) -> Iterator[tuple[Browser, str]]:
    from playwright.sync_api import sync_playwright

    app = create_app(settings, limits=limits)
    with serving(app) as port, sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            yield browser, f"http://127.0.0.1:{port}/"
        finally:
            browser.close()


def drag(page: Page, panel: str) -> None:
    """Drag across the middle third of a panel's chart (a zoom)."""
    box = page.locator(f"#panel-{panel} .u-over").bounding_box()
    assert box is not None
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=5)
    page.mouse.up()
