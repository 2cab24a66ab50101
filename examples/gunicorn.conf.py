"""gunicorn settings that make every worker write its last counts when it exits.

    gunicorn -c examples/gunicorn.conf.py [--preload] --chdir examples flask_app:app

Each worker buffers counts in memory and flushes them every second from its own thread. The
Recorder also flushes at interpreter exit, but gunicorn can end a worker in ways that skip
``atexit`` (``os._exit`` after a failed boot, ``max_requests`` restarts on some workers), so the
``worker_exit`` hook flushes explicitly. With ``--preload`` the app is imported in the master:
the Recorder resets itself in each forked worker, so nothing is counted twice.
"""

from __future__ import annotations

from typing import Any

import slicecount

graceful_timeout = 10


def worker_exit(server: Any, worker: Any) -> None:
    slicecount.close_all()
