"""Annotations (deploy markers...): one ZSET, score = time in epoch ms, member = JSON. Pure."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any

from slicecount.errors import ConfigurationError
from slicecount.operations.batches import Batch, Context, Operation
from slicecount.operations.checks import check_epoch


def annotate(
    ctx: Context,
    text: str,
    tags: Sequence[str] = (),
    when: float | None = None,
    end: float | None = None,
    title: str = "",
) -> Operation[dict[str, Any]]:
    """Record an annotation at ``when`` (default now) and return it."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError(f"annotation text must be a non-empty string, got {text!r}")
    if isinstance(tags, str) or not all(isinstance(t, str) and t for t in tags):
        raise ConfigurationError(f"annotation tags must be a list of strings, got {tags!r}")
    at = check_epoch(ctx.clock() if when is None else when, "annotation time")
    annotation: dict[str, Any] = {
        "id": secrets.token_hex(6),
        "time": int(at * 1000),
        "text": text,
        "tags": list(dict.fromkeys(tags)),
        "title": title or text.splitlines()[0][:80],
    }
    if end is not None:
        if check_epoch(end, "annotation end") < at:
            raise ConfigurationError(f"annotation end must be >= its time, got {end!r}")
        annotation["timeEnd"] = int(end * 1000)
    member = json.dumps(annotation, sort_keys=True, separators=(",", ":"))
    yield Batch([("ZADD", ctx.keys.annotations(), annotation["time"], member)])
    return annotation


def find(
    ctx: Context, start: float, end: float, tags: Sequence[str] = (), limit: int = 1000
) -> Operation[list[dict[str, Any]]]:
    """Annotations from ``start`` to ``end`` (epoch seconds) having all ``tags``, oldest
    first, at most ``limit``."""
    if not 0 <= start <= end:
        raise ConfigurationError(
            f"annotation range must have 0 <= start <= end, got {start!r}..{end!r}"
        )
    (members,) = yield Batch(
        [
            (
                "ZRANGEBYSCORE",
                ctx.keys.annotations(),
                int(start * 1000),
                int(end * 1000),
                "LIMIT",
                0,
                limit,
            )
        ]
    )
    wanted = set(tags)
    found = []
    for member in members:
        try:
            item = json.loads(member)
        except ValueError:
            continue  # not written by slicecount: skip rather than fail the panel
        if isinstance(item, dict) and isinstance(item.get("time"), int):
            if wanted <= set(item.get("tags", ())):
                found.append(item)
    return found
