"""What the sync and asyncio stores share beside the operations: client options, the Lua
scripts and the packing of a batch into RESP bytes. Sends nothing."""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

from hiredis import pack_command
from redis.backoff import NoBackoff
from redis.retry import Retry

from slicecount.batches import Batch, Command, ScriptCall
from slicecount.config import Settings

SCRIPTS = {
    name: (resources.files("slicecount") / "lua" / f"{name}.lua").read_text(encoding="utf-8")
    for name in ("trim",)
}
"""Lua scripts shipped as package data, sent by EVALSHA (loaded on NOSCRIPT)."""
SCRIPT_SHAS = {name: hashlib.sha1(src.encode()).hexdigest() for name, src in SCRIPTS.items()}

LOAD_SCRIPTS = Batch([("SCRIPT", "LOAD", source) for source in SCRIPTS.values()])
"""The batch that teaches a server (new, restarted or flushed) every script."""


def client_options(settings: Settings) -> dict[str, Any]:
    """redis-py connection options shared by the sync and asyncio clients."""
    return {
        "decode_responses": True,
        # RESP2, whatever the client's default: the operations decode flat HGETALL/ZSCAN
        # replies, and proxies and managed services that lack HELLO 3 still work.
        "protocol": 2,
        "socket_timeout": settings.socket_timeout,
        "socket_connect_timeout": settings.socket_timeout,
        # Retries belong to the caller (the Recorder merges a failed batch back): a silent
        # library retry of a MULTI/EXEC whose reply was lost could count it twice.
        "retry": Retry(NoBackoff(), 0),
    }


def pack(batch: Batch) -> bytes:
    """The batch as one RESP buffer (MULTI/EXEC around it for a transaction). hiredis packs a
    70 000-command flush in ~0.1 s; redis-py's pipeline would spend ~1 s of Python on it."""
    commands = [_wire(command) for command in batch.commands]
    if batch.transaction:
        commands = [("MULTI",), *commands, ("EXEC",)]
    return b"".join([pack_command(command) for command in commands])


def _wire(command: Command | ScriptCall) -> Command:
    """A command as sent: script calls become EVALSHA of the script's SHA1."""
    if isinstance(command, ScriptCall):
        sha = SCRIPT_SHAS[command.name]
        return ("EVALSHA", sha, len(command.keys), *command.keys, *command.args)
    return command
