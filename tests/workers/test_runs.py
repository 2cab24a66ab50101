"""The pure mapping of a task run to its counts: no server."""

from __future__ import annotations

import pytest

from slicecount.core.series import encode
from slicecount.errors import ConfigurationError
from slicecount.workers.runs import RunMapping


def test_a_run_counts_its_state_its_time_and_its_wait() -> None:
    mapping = RunMapping(
        encode, labels={"service": "shop"}, buckets=(1, 10), queue_wait_buckets=(5,)
    )
    entries = dict(mapping.entries("send_mail", "mail", "succeeded", 2.5, 7.25))
    base = 'queue="mail",service="shop",task="send_mail"'
    assert entries == {
        'tasks.runs{queue="mail",service="shop",state="succeeded",task="send_mail"}': 1,
        f'tasks.duration.bucket{{le="10",{base}}}': 1,
        f"tasks.duration.sum_us{{{base}}}": 2_500_000,
        f'tasks.queue_wait.bucket{{le="+Inf",{base}}}': 1,
        f"tasks.queue_wait.sum_us{{{base}}}": 7_250_000,
    }


def test_a_run_that_never_ran_counts_only_itself_and_a_wait_behind_our_clock_is_none() -> None:
    mapping = RunMapping(encode)
    assert mapping.entries("t", None, "revoked", None, None) == (
        ('tasks.runs{queue="<unknown>",state="revoked",task="t"}', 1),
    )
    waited = dict(mapping.entries("t", "q", "failed", 0.0, -3.0))  # a publisher's clock ahead
    assert waited['tasks.queue_wait.bucket{le="0.005",queue="q",task="t"}'] == 1
    assert waited['tasks.queue_wait.sum_us{queue="q",task="t"}'] == 0


def test_ids_are_remembered_within_their_bound() -> None:
    named: list[str] = []

    def namer(name: str, labels: object) -> str:
        named.append(name)
        return encode(name, labels)  # type: ignore[arg-type]

    mapping = RunMapping(namer, max_cached_ids=2)
    for _ in range(3):
        mapping.entries("a", "q", "succeeded", 1.0, None)
    first = len(named)
    for task in ("b", "c", "c"):
        mapping.entries(task, "q", "succeeded", 1.0, None)
    assert len(named) == first * 4  # "a" and "b" remembered; "c", past the bound, named twice


def test_static_labels_may_not_take_a_reserved_name() -> None:
    with pytest.raises(ConfigurationError, match="reserved"):
        RunMapping(encode, labels={"queue": "x"})
