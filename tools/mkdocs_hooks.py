"""mkdocs hooks (``hooks:`` in mkdocs.yml): the reference pages' freshness check, and the
root's CHANGELOG.md and CONTRIBUTING.md shown as pages of the site.

The two root files are read here rather than copied, so there is one text of each; their links
to ``docs/<page>.md`` are made relative to the site's pages.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # mkdocs loads this file by path

import docs_reference

INCLUDED = {"changelog.md": "CHANGELOG.md", "contributing.md": "CONTRIBUTING.md"}
"""A page of the site -> the root file it shows."""


def on_pre_build(config: Any) -> None:
    """Stop the build when a generated reference page is out of date with the code."""
    docs_reference.check_for_mkdocs()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    source = INCLUDED.get(page.file.src_uri)
    if source is None:
        return markdown
    text = (docs_reference.ROOT / source).read_text(encoding="utf-8")
    return text.replace("](docs/", "](")
