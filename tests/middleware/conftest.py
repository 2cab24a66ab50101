from __future__ import annotations

from collections.abc import Iterator

import pytest

from slicecount.recording.recorder import Recorder
from slicecount.store import Store


@pytest.fixture
def recorder(store: Store) -> Iterator[Recorder]:
    """A Recorder that only writes when the test flushes (or at close)."""
    recorder = Recorder(store, flush_interval=3600)
    yield recorder
    recorder.close()
