"""Debian's Chromium for the page tests (driven by playwright, no browser download): where it
is, the mark that skips a test without it, and a launch that makes no request of its own."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Playwright

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
