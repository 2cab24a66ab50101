"""What the cleaner's compaction does to a blocks-layout series, done by a test on a real server
(the cleaner is another module's): its open fields before a second move into its block."""

from __future__ import annotations

import redis

from slicecount.core import blocks, splices
from slicecount.core.frames import FRAME_SLICES
from slicecount.store import Store


def seal(client: redis.Redis, store: Store, series_id: str, before: int) -> dict[int, int]:
    """What the cleaner's compaction does to one series, done here: the open fields older
    than ``before`` move into its block (added to what the block held). Returns them."""
    keys = store.keys
    opened, block = keys.open(series_id), keys.block(series_id)
    moved = {int(f): int(n) for f, n in client.hgetall(opened).items() if int(f) < before}
    old = client.execute_command("GET", block, NEVER_DECODE=True) or b""  # type: ignore[no-untyped-call]
    frames: dict[tuple[int, int], list[int]] = {}
    header = blocks.parse_header(old)
    for precision, slices in blocks.everything(old).items():
        for start, n in slices.items():
            period = precision * FRAME_SLICES
            frame = frames.setdefault((precision, start - start % period), [0] * FRAME_SLICES)
            frame[(start % period) // precision] = n
    splices.add_counts(frames, store.settings.precisions, moved)
    splice = splices.plan_splice(header, store.settings.precisions, frames, {})
    assert splice.expected == header.generation
    client.set(block, splice.apply(old))
    pipe = client.pipeline(transaction=False)  # one round trip, not one a field
    for field, n in moved.items():
        pipe.hincrby(opened, str(field), -n)
    emptied = [str(f) for f, left in zip(moved, pipe.execute(), strict=True) if left == 0]
    if emptied:
        client.hdel(opened, *emptied)
    return moved
