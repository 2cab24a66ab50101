"""A faithful Python 3 port of Redis in Action's clean_counters (listing 5.4), one pass.

Kept as the book wrote it: the ZRANGE-by-index walk with a ZCARD per step, the schedule by
pass number, HKEYS + sort + bisect per counter, HDEL, and WATCH/MULTI to forget an emptied
counter. Two changes only: one pass instead of ``while not QUIT`` (the benchmark times passes),
and ``now`` injected instead of ``time.time()`` (so both cleaners trim to the same instant).
"""

from __future__ import annotations

import bisect

import redis

SAMPLE_COUNT = 120


def clean_counters_pass(conn: redis.Redis, now: float, passes: int) -> int:
    """One pass; returns the number of Redis calls it made."""
    calls = 0
    pipe = conn.pipeline(True)
    index = 0
    while True:
        calls += 1
        if not index < conn.zcard("known:"):
            break
        calls += 1
        hash_ = conn.zrange("known:", index, index)
        index += 1
        if not hash_:
            break
        member = str(hash_[0])
        prec = int(member.partition(":")[0])
        bprec = int(prec // 60) or 1
        if passes % bprec:
            continue
        hkey = "count:" + member
        cutoff = now - SAMPLE_COUNT * prec
        calls += 1
        samples = sorted(map(int, conn.hkeys(hkey)))
        remove = bisect.bisect_right(samples, cutoff)
        if remove:
            calls += 1
            conn.hdel(hkey, *samples[:remove])
            if remove == len(samples):
                try:
                    calls += 2
                    pipe.watch(hkey)  # type: ignore[no-untyped-call]
                    if not pipe.hlen(hkey):
                        calls += 1
                        pipe.multi()
                        pipe.zrem("known:", member)
                        pipe.execute()
                        index -= 1
                    else:
                        pipe.unwatch()
                except redis.exceptions.WatchError:
                    pass
    return calls
