"""The record of a discovered series, which every layer of the read path passes on. Pure."""

from __future__ import annotations

from typing import NamedTuple


class SeriesInfo(NamedTuple):
    """A discovered series: its id as stored, and its metric name and labels parsed once."""

    id: str
    name: str
    labels: dict[str, str]
