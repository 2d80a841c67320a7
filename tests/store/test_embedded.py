"""The embedded Redis: private to its owner (Unix socket, no TCP port, 0700 / 0600 files);
it rewrites its AOF without compression and loads the rewrite back."""

from __future__ import annotations

import logging
import os
import signal
import stat
import time
from pathlib import Path

import numpy as np
import pytest
import redis

from app.store import codec
from app.store.embedded import MAX_SOCKET_PATH_BYTES, EmbeddedRedis


def _listening_tcp_sockets() -> set[str]:
    """Inodes of every TCP socket of this network namespace that listens (IPv4 and IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in list(fh)[1:]:
                fields = line.split()
                if fields[3] == "0A":  # TCP_LISTEN
                    inodes.add(fields[9])
    return inodes


def _sockets_of(pid: int) -> set[str]:
    """Inodes of the sockets process ``pid`` holds open."""
    links = (os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
    return {link[len("socket:["):-1] for link in links if link.startswith("socket:[")}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_only_its_owner_can_reach_the_data(tmp_path: Path) -> None:
    """No TCP port to connect to without a password; the socket, the directory and every file
    (one left 0644 by an older version included) closed to other users."""
    data = tmp_path / "redis"
    data.mkdir(mode=0o755)
    (data / "appendonly.aof").write_bytes(b"")
    (data / "appendonly.aof").chmod(0o644)
    server = EmbeddedRedis(data).start()
    try:
        assert server.url == f"unix://{data / 'redis.sock'}?db=0"
        with redis.Redis.from_url(server.url) as client:
            client.set("k", b"v")
            assert client.config_get("port") == {"port": "0"}
        assert server.process is not None
        held = _sockets_of(server.process.pid)
        assert held and not held & _listening_tcp_sockets()
        assert _mode(data) == 0o700
        assert stat.S_ISSOCK((data / "redis.sock").stat().st_mode)
        assert _mode(data / "redis.sock") == 0o700
        _wait_for_file(data / "appendonly.aof")  # appendfsync everysec
        files = {p.name: _mode(p) for p in data.iterdir() if p.name != "redis.sock"}
        assert {"appendonly.aof", "redis.log"} <= set(files)
        assert set(files.values()) == {0o600}, files
    finally:
        server.stop()


def test_a_data_dir_too_deep_for_a_socket_address_gets_a_private_socket_dir(
        tmp_path: Path) -> None:
    data = tmp_path / ("d" * MAX_SOCKET_PATH_BYTES)
    server = EmbeddedRedis(data, appendonly=False).start()
    try:
        socket_dir = server.socket_path.parent
        assert socket_dir != data and _mode(socket_dir) == 0o700
        with redis.Redis.from_url(server.url) as client:
            assert client.ping()
    finally:
        server.stop()
    assert not socket_dir.exists()


def _wait_for_file(path: Path, content: bytes = b"", timeout: float = 20.0) -> None:
    """Until ``path`` exists and holds ``content`` (Redis writes its AOF once a second)."""
    deadline = time.monotonic() + timeout
    while not (path.is_file() and content in path.read_bytes()):
        assert time.monotonic() < deadline, f"{path} does not hold {content!r}"
        time.sleep(0.02)


def _wait_for_rewrite(client: redis.Redis, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = client.info("persistence")
        if not (info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"]):
            assert info["aof_last_bgrewrite_status"] == "ok"
            return
        time.sleep(0.02)
    raise AssertionError("the AOF rewrite did not end")


def test_uncompressed_aof_rewrite_is_loaded_back_after_a_crash(tmp_path: Path) -> None:
    contexts = {f"ctx:{i}": codec.encode({"x": row, "played": np.int64(i % 10)})
                for i, row in enumerate(np.random.default_rng(0).random((2000, 64)))}
    server = EmbeddedRedis(tmp_path).start()
    try:
        client = redis.Redis.from_url(server.url)
        assert client.config_get("rdbcompression") == {"rdbcompression": "no"}
        client.mset(contexts)
        client.bgrewriteaof()
        time.sleep(0.05)
        _wait_for_rewrite(client)
        client.set("after", b"rewrite")  # appended to the rewritten file
        client.close()
        _wait_for_file(tmp_path / "appendonly.aof", b"rewrite")  # appendfsync everysec
        assert server.process is not None
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(10)
        server.start()  # same socket, same files
        client = redis.Redis.from_url(server.url)
        assert client.dbsize() == len(contexts) + 1
        assert client.mget(list(contexts)) == list(contexts.values())
        assert client.get("after") == b"rewrite"
        client.close()
    finally:
        server.stop()


def _aof_with(data: Path, values: dict[str, bytes], rewrite: bool) -> None:
    """An AOF in ``data`` holding ``values`` (written in RDB form by a rewrite, or as
    commands), the server stopped."""
    server = EmbeddedRedis(data).start()
    try:
        with redis.Redis.from_url(server.url) as client:
            for key, value in values.items():
                client.set(key, value)
            if rewrite:
                client.bgrewriteaof()
                time.sleep(0.05)
                _wait_for_rewrite(client)
    finally:
        server.stop()


@pytest.mark.slow
def test_start_waits_while_the_aof_loads_longer_than_its_timeout(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Loading takes at least 600 keys x 5 ms = 3 s (Redis's ``key-load-delay``), three times
    the start's timeout: the start waits, logs the progress, and every key is there."""
    values = {f"ctx:{i}": bytes([i % 256]) * 32_768 for i in range(600)}
    _aof_with(tmp_path, values, rewrite=True)
    server = EmbeddedRedis(tmp_path, options=["--key-load-delay", "5000"])
    caplog.set_level(logging.INFO, logger="app.store.embedded")
    server.start(timeout=1.0)
    try:
        with redis.Redis.from_url(server.url) as client:
            assert client.dbsize() == len(values)
            assert client.get("ctx:599") == values["ctx:599"]
        assert any("loading its data" in r.getMessage() for r in caplog.records)
    finally:
        server.stop()


@pytest.mark.slow
def test_start_rewrites_an_aof_grown_past_twice_its_data(tmp_path: Path) -> None:
    """An AOF of 40 overwrites of one 100 KB value (4 MB for 100 KB of data, written while
    the rewrite threshold was 1 GB) is rewritten at the next start (threshold 1 MB); Redis
    alone would wait for it to double again."""
    server = EmbeddedRedis(tmp_path, options=["--auto-aof-rewrite-min-size", "1gb"]).start()
    try:
        with redis.Redis.from_url(server.url) as client:
            for i in range(40):
                client.set("k", bytes([i]) * 100_000)
            time.sleep(1.2)  # appendfsync everysec
    finally:
        server.stop()
    assert (tmp_path / "appendonly.aof").stat().st_size > 4_000_000
    server = EmbeddedRedis(tmp_path, options=["--auto-aof-rewrite-min-size", "1mb"]).start()
    try:
        with redis.Redis.from_url(server.url) as client:
            _wait_for_rewrite(client)
            assert client.info("persistence")["aof_current_size"] < 1_000_000
            assert client.get("k") == bytes([39]) * 100_000
    finally:
        server.stop()


def test_start_refuses_a_server_that_never_rewrites_its_aof(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path, options=["--auto-aof-rewrite-percentage", "0"])
    with pytest.raises(RuntimeError, match="auto-aof-rewrite-percentage 0"):
        server.start()
    server.stop()
