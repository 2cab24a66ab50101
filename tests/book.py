"""A faithful Python 3 port of Redis in Action §5.2.1 update_counter / get_counter.

Written from the book's listing: one pipeline (MULTI/EXEC) that, for every precision, records
``prec:name`` in the ``known:`` ZSET with score 0 and HINCRBYs the slice start in
``count:prec:name``; get_counter reads the hash and returns sorted integer pairs.
"""

from __future__ import annotations

import time

import redis

PRECISION = [1, 5, 60, 300, 3600, 18000, 86400]


def update_counter(conn: redis.Redis, name: str, count: int = 1, now: float | None = None) -> None:
    now = now or time.time()
    pipe = conn.pipeline()
    for prec in PRECISION:
        pnow = int(now / prec) * prec
        hash_ = f"{prec}:{name}"
        pipe.zadd("known:", {hash_: 0})
        pipe.hincrby("count:" + hash_, str(pnow), count)
    pipe.execute()


def get_counter(conn: redis.Redis, name: str, precision: int) -> list[tuple[int, int]]:
    hash_ = f"{precision}:{name}"
    data = conn.hgetall("count:" + hash_)
    to_return = [(int(key), int(value)) for key, value in data.items()]
    to_return.sort()
    return to_return
