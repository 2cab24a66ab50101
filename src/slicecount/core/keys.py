"""The only place that formats or parses a Redis key, registry member, glob or lex cursor. Pure.

With prefix ``P`` and one shard (the book's layout)::

    P count:<prec>:<series>   HASH  slice start -> count
    P known:                  ZSET  member <prec>:<series>, score 0

With ``shards = S > 1`` the registry splits into ``P known:{s}`` and hashes become
``P count:{s}:<prec>:<series>``, ``s = blake2b(series) % S``: each series shares one hash slot with
its registry, so every multi-key operation stays inside one slot. (crc32 was lumpy over ids that
differ by a counter: 3 000 such series fell 1 010/1 081/909 over three cluster masters.)

A unique series (distinct values per slice; sharded: ``{s}`` after the first colon, as above)::

    P unique:<prec>:<series>:<start>    HLL   the slice's values, expiring after retention
    P members:<prec>:<series>:<start>   SET   exact mode: up to the cap + 1 values, expiring too
    P uniques:                          ZSET  member <prec>:<series>, score: its newest expiry
    P scratch:<token>                   HLL   a union or a sketch (deleted in the same call)

The blocks layout (``Settings.layout = "blocks"``: sealed history in compact blocks; sharded
as above)::

    P open:<digest>     HASH    finest slice start -> count: the slices still open to writers
    P block:<digest>    STRING  the sealed slices of every precision (core/blocks.py)

(``<digest>``: ``series_digest(series)``, 16 characters: the registry member holds the id.)
    P known:            ZSET    member 0:<series> (one per series: 0 stands for every precision)
    P marks:            ZSET    member writer id, score: the oldest second it may still send

Exemplars (either layout; sharded as above, a series' exemplars in its shard)::

    P exemplars:        ZSET    score 0, member <slot>:<digest>:<exemplar>: sorted by slot (the
                                epoch minute, 10 digits) first, so the oldest rank first

A rate limit's hits (whatever the shard count: the identity is the hash tag)::

    P throttle:{<identity>}:<amount>/<seconds>:<window>   STRING  hits, expiring by itself
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from slicecount.core.key_layouts import (
    Counter,
    Layout,
    Member,
    SeriesKeys,
    UniqueLayout,
    UniqueSlot,
)

K = TypeVar("K")
V = TypeVar("V")
EVERY_PRECISION = 0
"""The precision of a blocks-layout registry member: the series is kept at every precision."""
LAYOUT_CACHE_SIZE = 65_536
"""Series whose keys are remembered between flushes (a flush writes the same series again)."""


# -- the short names keys carry in place of what they name ------------------------------

THROTTLE_TAG_MAX = 128
"""Identities longer than this (in characters) are hashed in throttle keys."""
_TAG_ESCAPES = {ord(ch): f"%{ord(ch):02X}" for ch in "%{}#"}


def throttle_tag(identity: str) -> str:
    """The hash tag of an identity (a client address, a user, a header: any string): itself,
    with ``%``, ``{``, ``}`` and ``#`` percent-escaped so that no ``}`` ends the tag early; an
    empty, long or un-encodable one (a lone surrogate) becomes ``#`` and a hash of it (escaped
    tags never start with ``#``, so two identities never share a key)."""
    if 0 < len(identity) <= THROTTLE_TAG_MAX:
        try:
            identity.encode()
        except UnicodeEncodeError:
            pass
        else:
            return identity.translate(_TAG_ESCAPES)
    raw = identity.encode("utf-8", "surrogatepass")
    return "#" + hashlib.blake2b(raw, digest_size=16).hexdigest()


def series_digest(series_id: str) -> str:
    """A series' short name in the blocks layout's keys: 96 bits of its BLAKE2b in base64url
    (16 characters). A key costs Redis its name once more; a series id is ~80 bytes, and a
    block of a quiet series a few hundred: the registry member keeps the id itself."""
    raw = series_id.encode("utf-8", "surrogatepass")
    return base64.urlsafe_b64encode(hashlib.blake2b(raw, digest_size=12).digest()).decode()


@dataclass(frozen=True)
class KeySpace:
    """Key naming for one prefix and shard count."""

    prefix: str = ""
    shards: int = 1
    _layouts: dict[tuple[str, tuple[int, ...]], Layout] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _unique_layouts: dict[tuple[str, tuple[int, ...]], UniqueLayout] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _series_keys: dict[str, SeriesKeys] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def shard(self, series_id: str) -> int:
        """The shard a series lives on (always 0 with one shard)."""
        if self.shards == 1:
            return 0
        digest = hashlib.blake2b(series_id.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.shards

    def known(self, shard: int = 0) -> str:
        """The registry ZSET of one shard."""
        return self._registry("known", shard)

    def registries(self) -> list[str]:
        """Every registry ZSET, one per shard."""
        return [self.known(s) for s in range(self.shards)]

    def known_for(self, series_id: str) -> str:
        """The registry ZSET that lists ``series_id``."""
        return self.known(self.shard(series_id))

    def counter(self, precision: int, series_id: str) -> str:
        """The HASH holding one series at one precision."""
        return self.counter_for_member(self.shard(series_id), self.member(precision, series_id))

    def counter_for_member(self, shard: int, member: str) -> str:
        """The HASH named by a registry member found in the registry of ``shard``."""
        return self._in_slot("count", shard, member)

    def layout(self, series_id: str, precisions: tuple[int, ...]) -> Layout:
        """The registry of a series and its counter at each precision (cached: the write path
        asks for the same series at every flush)."""

        def make() -> Layout:
            counters = (
                Counter(p, self.member(p, series_id), self.counter(p, series_id))
                for p in precisions
            )
            return Layout(self.known_for(series_id), tuple(counters), self.shard(series_id))

        return _remembered(self._layouts, (series_id, precisions), make)

    def open_layout(self, series_id: str, precisions: tuple[int, ...]) -> Layout:
        """Blocks layout: the series as the write path sees it, one counter: its open hash,
        at the finest precision, under its one registry member (cached as ``layout``; the
        same signature, so the flush picks one or the other once)."""

        def make() -> Layout:
            shard = self.shard(series_id)
            opened = self.open(series_id, shard)
            counter = Counter(precisions[0], self.series_member(series_id), opened)
            return Layout(self.known(shard), (counter,), shard)

        # no ladder starts at 0: never the key of a ``layout``
        return _remembered(self._layouts, (series_id, (EVERY_PRECISION, precisions[0])), make)

    def open(self, series_id: str, shard: int | None = None) -> str:
        """Blocks layout: the HASH of a series' open slices (finest precision); ``shard``:
        where a registry of that shard names it (another shard count's, while resharding)."""
        where = self.shard(series_id) if shard is None else shard
        return self._in_slot("open", where, series_digest(series_id))

    def block(self, series_id: str, shard: int | None = None) -> str:
        """Blocks layout: the STRING of a series' sealed slices, every precision (``shard``:
        as for ``open``)."""
        where = self.shard(series_id) if shard is None else shard
        return self._in_slot("block", where, series_digest(series_id))

    def series_keys(self, series_id: str) -> SeriesKeys:
        """Blocks layout: a series' shard, ``block`` and ``open`` keys, remembered (every
        range read names them, and each costs two hashes of the id)."""

        def make() -> SeriesKeys:
            shard = self.shard(series_id)
            return SeriesKeys(shard, self.block(series_id, shard), self.open(series_id, shard))

        return _remembered(self._series_keys, series_id, make)

    def marks(self, shard: int = 0) -> str:
        """Blocks layout: the ZSET of each writer's oldest second it may still send to
        ``shard`` (written in its chunks' transactions, so it lives in the shard's slot)."""
        return self._registry("marks", shard)

    def exemplars(self, shard: int = 0) -> str:
        """The ZSET of the exemplars of ``shard``'s series (in the shard's slot, so a flush
        chunk writes them in its transaction)."""
        return self._registry("exemplars", shard)

    def uniques(self, shard: int = 0) -> str:
        """The registry ZSET of the unique series of one shard."""
        return self._registry("uniques", shard)

    def unique_registries(self) -> list[str]:
        """Every unique-series registry, one per shard."""
        return [self.uniques(s) for s in range(self.shards)]

    def unique_slot(self, shard: int, member: str) -> UniqueSlot:
        """The keys of the unique series named by a registry member found on ``shard``."""
        tag, precision = "" if self.shards == 1 else f"{{{shard}}}:", self.parse_member(member)[0]
        hll, members = f"{self.prefix}unique:{tag}{member}:", f"{self.prefix}members:{tag}{member}:"
        return UniqueSlot(precision, member, hll, members)

    def unique_layout(self, series_id: str, precisions: tuple[int, ...]) -> UniqueLayout:
        """The registry of a unique series and its keys at each precision (cached)."""

        def make() -> UniqueLayout:
            shard = self.shard(series_id)
            slots = tuple(self.unique_slot(shard, self.member(p, series_id)) for p in precisions)
            return UniqueLayout(self.uniques(shard), slots, shard)

        return _remembered(self._unique_layouts, (series_id, precisions), make)

    def scratch(self, shard: int, token: str) -> str:
        """A key in ``shard``'s slot for a union or a sketch (deleted by the same call)."""
        return self._in_slot("scratch", shard, token)

    def writer(self, writer_id: str, shard: int = 0) -> str:
        """The STRING holding the last batch number a writer applied on ``shard`` (in the
        shard's slot). No TTL, so no eviction policy picks it; the cleaner forgets it."""
        return self._in_slot("writer", shard, writer_id)

    def writers(self, shard: int = 0) -> str:
        """The ZSET of the writers of ``shard``, scored by the time of their last write."""
        return self._registry("writers", shard)

    def cleaner_cutoffs(self) -> str:
        """HASH precision -> the cutoff the last complete cleaner pass trimmed to."""
        return self._tagged_zero("cleaner:cutoffs")

    def cleaner_sweeps(self) -> str:
        """HASH precision -> the start of the pass whose sweep of it last completed (beside
        the cutoffs, in shard 0's slot on a cluster)."""
        return self._tagged_zero("cleaner:sweeps")

    def cleaner_sweep_claim(self, precision: int, last: int | None) -> str:
        """The claim that elects the one cleaner sweeping ``precision`` after the sweep that
        completed at ``last`` (None: none on record): a completed sweep changes the name."""
        after = "none" if last is None else str(last)
        return f"{self._tagged_zero('cleaner:sweep')}:{precision}:{after}"

    def _registry(self, kind: str, shard: int) -> str:
        """``P kind:``; with shards, ``P kind:{shard}`` (the shard's slot)."""
        return f"{self.prefix}{kind}:" if self.shards == 1 else f"{self.prefix}{kind}:{{{shard}}}"

    def _in_slot(self, kind: str, shard: int, name: str) -> str:
        """``P kind:name``; with shards, ``P kind:{shard}:name`` (in the shard's slot)."""
        tag = "" if self.shards == 1 else f"{{{shard}}}:"
        return f"{self.prefix}{kind}:{tag}{name}"

    def _tagged_zero(self, name: str) -> str:
        return f"{self.prefix}{name}" if self.shards == 1 else f"{self.prefix}{name}:{{0}}"

    def cleaner_lease(self, pass_index: int) -> str:
        """The lease that elects the one cleaner doing pass ``pass_index``."""
        return f"{self.prefix}cleaner:lease:{pass_index}"

    def annotations(self) -> str:
        """The ZSET of annotations (deploy markers...): score = time in epoch ms."""
        return self._registry("annotations", 0)

    def move_intent(self, shard: int, member: str) -> str:
        """HASH beside a counter being moved to another shard layout (in its slot): the move's
        token and the counts it takes (resharding.py)."""
        return self._in_slot("moving", shard, member)

    def move_landed(self, shard: int, token: str) -> str:
        """STRING set, in the slot a move lands in, when the move of ``token`` landed there."""
        return self._in_slot("moved", shard, token)

    def throttle(self, identity: str, amount: int, seconds: int, window: int) -> str:
        """The STRING counting the hits of ``identity`` against a limit of ``amount`` per
        ``seconds`` in window ``window`` (epoch seconds // ``seconds``). Whatever the shard
        count, the identity is the hash tag: its every limit and window share one slot, so one
        script reaches them all on a cluster. It expires by itself (throttle/operations.py)."""
        return f"{self.prefix}throttle:{{{throttle_tag(identity)}}}:{amount}/{seconds}:{window}"

    @staticmethod
    def series_member(series_id: str) -> str:
        """Blocks layout: the one registry member of a series, for every precision."""
        return f"{EVERY_PRECISION}:{series_id}"

    @staticmethod
    def exemplar_slot(slot: int, series_id: str) -> str:
        """What every member of one (slot, series) begins with: ``<slot>:<digest>:``."""
        return f"{slot:010d}:{series_digest(series_id)}:"

    @staticmethod
    def exemplar_digest(series_id: str) -> str:
        """The series' part of its exemplar members (its digest, as its blocks' keys)."""
        return series_digest(series_id)

    @staticmethod
    def lex_range_slot(slot_prefix: str) -> tuple[str, str]:
        """ZRANGEBYLEX bounds of the members of one (slot, series)."""
        return _starting_with(slot_prefix)

    @staticmethod
    def lex_range_slots(first: int, last: int) -> tuple[str, str]:
        """ZRANGEBYLEX bounds of the exemplars of slots ``first`` to ``last``."""
        return f"[{first:010d}:", f"({last + 1:010d}:"

    @staticmethod
    def lex_range_before(slot: int) -> tuple[str, str]:
        """ZRANGEBYLEX bounds of the exemplars of every slot before ``slot``."""
        return "-", f"({max(slot, 0):010d}:"

    @staticmethod
    def parse_exemplar_member(member: str) -> tuple[int, str, str]:
        """``(slot, digest, exemplar)`` of a member; ValueError for anything else."""
        slot, digest, rest = member.split(":", 2)
        if len(slot) != 10 or not slot.isdigit() or len(digest) != 16:
            raise ValueError(f"malformed exemplar member {member[:80]!r}")
        return int(slot), digest, rest

    @staticmethod
    def member(precision: int, series_id: str) -> str:
        """The registry member of one series at one precision (the book's ``prec:name``)."""
        return f"{precision}:{series_id}"

    @staticmethod
    def parse_member(member: str) -> Member:
        """``"60:http.requests{...}"`` -> ``Member(60, "http.requests{...}")``, else ValueError."""
        precision, sep, series_id = member.partition(":")
        if not sep or not precision.isdigit() or not series_id:
            raise ValueError(f"malformed registry member {member!r}")
        return Member(int(precision), series_id)

    @staticmethod
    def series_listed(members: Iterable[str], precision: int) -> list[str]:
        """The series ids of registry members of ``precision`` (a lex range of them: see
        ``lex_range_precision``), each cut after its prefix at once rather than parsed: a
        dashboard's discovery lists thousands. A member without the prefix, or with nothing
        after it, is not ours and is left out, as ``parse_member`` refuses it."""
        prefix = f"{precision}:"
        n = len(prefix)
        return [m[n:] for m in members if len(m) > n and m.startswith(prefix)]

    @staticmethod
    def lex_range_precision(precision: int) -> tuple[str, str]:
        """ZRANGEBYLEX bounds of every member at ``precision``."""
        return _starting_with(f"{precision}:")

    @staticmethod
    def lex_range_labelled(precision: int, name: str) -> tuple[str, str]:
        """ZRANGEBYLEX bounds of the labelled series of ``name``."""
        return _starting_with(f"{precision}:{name}{{")

    @staticmethod
    def lex_after(member: str) -> str:
        """The ZRANGEBYLEX start that continues a walk right after ``member``."""
        return "(" + member

    @staticmethod
    def member_globs(name: str, series_id: str | None) -> list[str]:
        """ZSCAN MATCH patterns for the members of one series (any precision), or of every
        series of metric ``name``. Coarse: callers confirm each hit with ``parse_member``."""
        if series_id is not None:
            return [f"*:{_glob_escape(series_id)}"]
        escaped = _glob_escape(name)
        return [f"*:{escaped}", f"*:{escaped}{{*"]


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


def _remembered(cache: dict[K, V], key: K, make: Callable[[], V]) -> V:
    """``cache[key]``, made by ``make()`` the first time (a full cache starts over)."""
    found = cache.get(key)
    if found is None:
        if len(cache) >= LAYOUT_CACHE_SIZE:
            cache.clear()
        found = cache[key] = make()
    return found


def _starting_with(prefix: str) -> tuple[str, str]:
    """ZRANGEBYLEX bounds of every member beginning with ``prefix``: from it up to the same
    prefix with its last character the next one (';' after ':', '|' after '{')."""
    return f"[{prefix}", f"({prefix[:-1]}{chr(ord(prefix[-1]) + 1)}"
