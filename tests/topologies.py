"""Redis topologies beyond one server, spawned on free ports and stopped by pid: a primary with
a replica guarded by three Sentinels."""

from __future__ import annotations

import os
import signal
import time

import redis

from slicecount.embedded import EmbeddedRedis

SERVICE = "slicecount"
DOWN_AFTER_MS = 1000
"""How long the Sentinels wait before they call a silent primary down (small: tests wait)."""


class SentinelGroup:
    """A primary, its replica and three Sentinels (quorum 2) watching it as ``SERVICE``."""

    def __init__(self) -> None:
        self.primary = EmbeddedRedis()
        self.replica = EmbeddedRedis(args=["--replicaof", "127.0.0.1", str(self.primary.port)])
        watch = (
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} 10000\n"
        )
        self.sentinels = [
            EmbeddedRedis(config=watch, args=["--sentinel"], ready="+monitor master")
            for _ in range(3)
        ]

    @property
    def url(self) -> str:
        nodes = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{nodes}/{SERVICE}/0"

    def __enter__(self) -> SentinelGroup:
        self.primary.start()
        self.replica.start()
        for sentinel in self.sentinels:
            sentinel.start()
        self._wait(self._ready, "the replica to sync and every Sentinel to know it")
        return self

    def __exit__(self, *exc: object) -> None:
        for server in (*self.sentinels, self.replica, self.primary):
            server.close()

    def _ready(self) -> bool:
        with redis.Redis(port=self.replica.port, decode_responses=True) as replica:
            if replica.info("replication").get("master_link_status") != "up":
                return False
        for sentinel in self.sentinels:
            with redis.Redis(port=sentinel.port, decode_responses=True) as client:
                if not client.execute_command("SENTINEL", "REPLICAS", SERVICE):
                    return False
        return True

    def primary_port(self) -> int:
        """The port the Sentinels name as the primary now."""
        with redis.Redis(port=self.sentinels[0].port, decode_responses=True) as client:
            _, port = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
            return int(port)

    def kill_primary(self) -> None:
        """SIGKILL the primary (no goodbye to anyone) and wait for the replica's promotion."""
        pid = self.primary.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        self._wait(lambda: self.primary_port() == self.replica.port, "the failover")

    @staticmethod
    def _wait(done: object, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if done():  # type: ignore[operator]
                    return
            except redis.RedisError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")
