"""gunicorn settings for the example app (``gunicorn -c python:slicecount.examples.gunicorn_conf``):
every worker writes its last counts when it exits. ``examples/gunicorn.conf.py`` is the same
for use as a file."""

from __future__ import annotations

from typing import Any

import slicecount

graceful_timeout = 10


def worker_exit(server: Any, worker: Any) -> None:
    slicecount.close_all()
