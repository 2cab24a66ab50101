"""The defaults of ``Settings``, each named with a line saying why it is what it is. Pure.

(The configuration reference, ``docs/reference/configuration.md``, shows a ``DEFAULT_*``
constant's docstring for a field that has none of its own: ``tools/docs_reference.py``.)
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

DEFAULT_REDIS_URL = "redis://localhost:6379/0"
"""Where Redis is when nothing says otherwise."""
DEFAULT_PRECISIONS = (1, 5, 60, 300, 3600, 18000, 86400)
"""Slice lengths in seconds: the book's ladder, 1 s to 1 day (the book's layout's default; the
default layout's: ``BLOCKS_PRECISIONS``)."""
DEFAULT_RETENTION = 120
"""Slices kept per precision of the book's ladder, and of a ladder given without retention;
below 128 every hash stays in Redis's compact listpack encoding."""
LAYOUTS = ("book", "blocks")
"""How counts are kept: the book's hash per series and precision, or compact blocks."""
DEFAULT_LAYOUT = "blocks"
"""Compact blocks: the layout that meets the memory and speed goals (docs/architecture.md); the
book's (one hash per series and precision, one field per slice) is ``layout="book"``."""
BLOCKS_PRECISIONS = (1, 5, 60, 3600, 86400)
"""The blocks layout's ladder: every Grafana step from 5 minutes to 30 days divides into whole
slices of one of them."""
BLOCKS_RETENTION: Mapping[int, int] = MappingProxyType(
    {1: 600, 5: 34_560, 60: 44_640, 3600: 9_600, 86400: 1_830}
)
"""Slices the blocks layout's ladder keeps: 1 s for 10 minutes, 5 s for 2 days, 60 s for 31
days, 1 h for 400 days, 1 day for 5 years."""
DEFAULT_FLUSH_INTERVAL = 1.0
"""Seconds between two flushes of a Recorder's buffer."""
DEFAULT_MAX_PENDING = 100_000
"""Buffered (series, second) entries a Recorder keeps while Redis is away before it drops."""
DEFAULT_MAX_SERIES_PER_METRIC = 1000
"""Distinct label sets one process records per metric name before folding into overflow."""
DEFAULT_MAX_METRICS = 1000
"""Distinct metric names one process records; events of further names are refused and counted."""
DEFAULT_MAX_FUTURE = 300.0
"""Seconds a count's time may lie ahead of the clock (hosts' clocks disagree a little); a time
further ahead is refused, so no far-future slice can outlive retention."""
DEFAULT_CLOSE_TIMEOUT = 5.0
"""Seconds a Recorder keeps trying to write its last counts when it closes (at exit too): well
inside gunicorn's graceful timeout (30 s) and Kubernetes' grace period (30 s)."""
DEFAULT_SOCKET_TIMEOUT = 5.0
"""Seconds a Redis call may take before it counts as failed (the flusher retries later)."""
UNIQUE_MIN_PRECISION = 60
"""Unique counts are kept, by default, at the precisions from this one up: a HyperLogLog costs
up to 12 kB per slice, a hash field a few bytes."""
DEFAULT_UNIQUE_EXACT_CAP = 1000
"""Values an exact-mode slice lists before it counts by its HyperLogLog alone."""
DEFAULT_THROTTLE_DEADLINE = 0.005
"""Seconds a rate-limit check waits on Redis (a few ms: a request must not wait longer)."""
DEFAULT_MAX_EXEMPLARS = 100_000
"""Exemplars kept per shard, oldest out first: Prometheus's default bound
(``storage.exemplars.max_exemplars``), about 18 MB of Redis (184 bytes an exemplar measured:
docs/exemplars.md)."""
DEFAULT_EXEMPLAR_RETENTION = 14 * 86_400
"""Seconds an exemplar is kept: Grafana Tempo's default trace retention (a link to a trace
its backend no longer holds leads nowhere)."""
TRACE_ID_PLACEHOLDER = "${__value.raw}"
"""What stands for a trace id in ``trace_url``: Grafana's own syntax, so one setting serves
its provisioning and the built-in page."""
DEFAULT_SWEEP_PERIOD = 3600.0
"""Seconds between two cleaner sweeps of a precision (the pass that lists every hash)."""
CLUSTER_SHARDS = 64
"""Shards on a Redis Cluster by default: the slots of the tags {0}..{63} fall 21/22/21 over the
three masters of redis-cli's even layout (12 shards fall 4/5/3), and reads stay cheap (one
registry look-up per shard)."""
