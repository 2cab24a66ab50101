from __future__ import annotations

import pytest

from slicecount.core.keys import THROTTLE_TAG_MAX, KeySpace, throttle_tag


def test_one_shard_is_the_book_layout() -> None:
    keys = KeySpace()
    assert keys.counter(60, "hits") == "count:60:hits"
    assert keys.known_for("hits") == "known:"
    assert keys.member(60, "hits") == "60:hits"
    assert keys.registries() == ["known:"]
    assert keys.counter_for_member(0, "60:hits") == "count:60:hits"


def test_prefix_and_shards_share_a_slot_per_series() -> None:
    keys = KeySpace(prefix="app:", shards=8)
    sid = 'http.requests{route="/"}'
    shard = keys.shard(sid)
    assert 0 <= shard < 8
    assert keys.counter(5, sid) == f"app:count:{{{shard}}}:5:{sid}"
    assert keys.known_for(sid) == f"app:known:{{{shard}}}"
    assert keys.counter_for_member(shard, keys.member(5, sid)) == keys.counter(5, sid)
    assert len(set(keys.registries())) == 8


def test_members_parse_back() -> None:
    assert KeySpace.parse_member('60:a:b{x="1:2"}') == (60, 'a:b{x="1:2"}')
    for bad in ("x:hits", "60", "60:", ":hits"):
        with pytest.raises(ValueError, match="malformed"):
            KeySpace.parse_member(bad)


def test_the_series_listed_at_a_precision_are_what_parse_member_finds() -> None:
    members = ['60:a:b{x="1:2"}', "60:up", "60:", "600:x", "6:y", "x:y", "60", "0:z"]
    listed = KeySpace.series_listed(members, 60)
    assert listed == ['a:b{x="1:2"}', "up"]
    parsed = []
    for member in members:
        try:
            precision, series_id = KeySpace.parse_member(member)
        except ValueError:
            continue
        if precision == 60:
            parsed.append(series_id)
    assert listed == parsed


def test_lex_ranges_bracket_exactly_one_metric() -> None:
    members = sorted(
        [
            "60:hits",
            '60:hits{a="1"}',
            "60:hits.total",
            '60:hitsz{a="1"}',
            '5:hits{a="1"}',
            '60:hits{a="~"}',
            "600:hits",
        ]
    )
    low, high = KeySpace.lex_range_labelled(60, "hits")
    inside = [m for m in members if low[1:] <= m < high[1:]]
    assert inside == ['60:hits{a="1"}', '60:hits{a="~"}']
    low, high = KeySpace.lex_range_precision(60)
    inside = [m for m in members if low[1:] <= m < high[1:]]
    assert "600:hits" not in inside and '5:hits{a="1"}' not in inside and len(inside) == 5


def test_layout_is_cached_and_consistent() -> None:
    keys = KeySpace(prefix="p:")
    registry, layout, shard = keys.layout("s", (1, 60))
    assert registry == "p:known:" and shard == 0
    assert layout == ((1, "1:s", "p:count:1:s"), (60, "60:s", "p:count:60:s"))
    assert keys.layout("s", (1, 60)) is keys.layout("s", (1, 60))


def test_cursors_and_globs_come_from_here() -> None:
    assert KeySpace.lex_after("60:a") == "(60:a"
    assert KeySpace.member_globs("m", None) == ["*:m", "*:m{*"]
    assert KeySpace.member_globs("m", 'm{k="a*"}') == ['*:m{k="a\\*"}']
    layout = KeySpace().layout("s", (60,))
    assert layout.registry == "known:" and layout.counters[0].key == "count:60:s"


def hash_tag(key: str) -> str | None:
    """What Redis Cluster hashes: the text between the first ``{`` and the next ``}``."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key[start + 1 : end] if start >= 0 and end > start + 1 else None


def test_throttle_keys_carry_the_identity_as_hash_tag_whatever_the_shards() -> None:
    for keys in (KeySpace(), KeySpace(prefix="app:", shards=8)):
        key = keys.throttle("10.0.0.1", 10, 1, 1_700_000_000)
        assert key == f"{keys.prefix}throttle:{{10.0.0.1}}:10/1:1700000000"
        assert hash_tag(key) == "10.0.0.1"


TRICKY = ["a}b", "}", "{", "{}", "a{b}c", "%7D", "a%7Db", "%", "#", "#x", "", " ", "é", "用户",
          "\ud800", "x" * THROTTLE_TAG_MAX, "x" * (THROTTLE_TAG_MAX + 1), "user:1",
          "a:10/1:5"]  # fmt: skip


@pytest.mark.parametrize("identity", TRICKY)
def test_no_identity_breaks_its_tag(identity: str) -> None:
    keys = KeySpace(prefix="p:", shards=4)
    found = {
        keys.throttle(identity, amount, seconds, window)
        for amount, seconds in ((10, 1), (1000, 3600))
        for window in (5, 6)
    }
    assert len(found) == 4
    assert {hash_tag(key) for key in found} == {throttle_tag(identity)}  # one slot for all
    assert "}" not in throttle_tag(identity) and "{" not in throttle_tag(identity)


def test_different_identities_never_share_a_tag() -> None:
    tags = [throttle_tag(identity) for identity in TRICKY]
    assert len(set(tags)) == len(TRICKY)


def test_long_empty_and_unencodable_identities_are_hashed() -> None:
    assert throttle_tag("user 1") == "user 1"
    assert throttle_tag("a}b{c%d#") == "a%7Db%7Bc%25d%23"
    for identity in ("", "x" * (THROTTLE_TAG_MAX + 1), "\ud800"):
        tag = throttle_tag(identity)
        assert tag.startswith("#") and len(tag) == 33


def test_a_series_keys_are_remembered_and_the_ones_block_and_open_name() -> None:
    for shards in (1, 4):
        keys = KeySpace("app:", shards)
        found = keys.series_keys('x{a="1"}')
        assert found == (keys.shard('x{a="1"}'), keys.block('x{a="1"}'), keys.open('x{a="1"}'))
        assert keys.series_keys('x{a="1"}') is found
