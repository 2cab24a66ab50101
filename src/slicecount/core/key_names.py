"""The short names keys carry in place of what they name: a series' digest (the blocks
layout's keys) and an identity's hash tag (a rate limit's). Pure.

``keys.py`` builds every key from these; nothing else uses them to name a key.
"""

from __future__ import annotations

import base64
import hashlib

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
