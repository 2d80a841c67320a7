"""The embedded Redis rewrites its AOF without compression and loads the rewrite back."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import numpy as np
import redis

from app.store import codec
from app.store.embedded import EmbeddedRedis


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
        time.sleep(1.5)  # appendfsync everysec
        assert server.process is not None
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(10)
        server.start()  # same port, same files
        client = redis.Redis.from_url(server.url)
        assert client.dbsize() == len(contexts) + 1
        assert client.mget(list(contexts)) == list(contexts.values())
        assert client.get("after") == b"rewrite"
        client.close()
    finally:
        server.stop()
