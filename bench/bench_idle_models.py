"""CPU of ``noisyloop serve`` and its embedded Redis while many models get no traffic.

Starts ``noisyloop serve`` (the code of the current directory) on a
temporary data directory, creates ``M`` small models (``label``/``rcnbf``,
d = 4, in 5 tenants), waits until its trainer holds them all and their
first reads are done, then measures the CPU time (user + system, from
``/proc``) of the serve process and of its redis-server over ``S`` seconds
with no request at all.  Prints both as a share of one core, and the
commands Redis ran per second (from ``INFO commandstats``; unlike the CPU
shares, these do not depend on how busy the machine is).  The same
script run from another checkout measures that code (the "before" figure).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_idle_models.py 500 20
    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_idle_models.py 5000 20
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import redis
from noisyloop_client import Client

from app.bench.machine import linux_process_cpu_seconds
from app.bench.serve import served

#: Seconds given to the trainer to take every model's lease before measuring.
SETTLE_SECONDS = 5.0


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from ``/proc``)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def commands(r: redis.Redis) -> dict[str, int]:
    """Calls of each command so far (``INFO commandstats``)."""
    stats = r.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def main(models: int, seconds: float) -> None:
    with served("t0") as serve:
        with Client(serve.url, admin_token=serve.token) as admin:
            keys = [serve.key, *(admin.create_tenant(f"t{i}")["api_key"] for i in range(1, 5))]
        clients = [Client(serve.url, key) for key in keys]
        for i in range(models):
            clients[i % 5].create_model(f"m{i}", "label", 4, algorithm="rcnbf",
                                        n_classes=3, seed=0)
        for c in clients:
            c.close()
        time.sleep(SETTLE_SECONDS)
        proc = serve.proc
        redis_pids = [p for p in children(proc.pid)
                      if "redis-server" in Path(f"/proc/{p}/cmdline").read_text()]
        pids = {"serve": [proc.pid], "redis": redis_pids}
        sock = next(serve.data.rglob("redis.sock"))
        r = redis.Redis(unix_socket_path=str(sock))
        calls = commands(r)
        before = {k: sum(linux_process_cpu_seconds(p) for p in v) for k, v in pids.items()}
        start = time.perf_counter()
        time.sleep(seconds)
        wall = time.perf_counter() - start
        used = {k: sum(linux_process_cpu_seconds(p) for p in v) - before[k]
                for k, v in pids.items()}
        rates = {k: (n - calls.get(k, 0)) / wall for k, n in commands(r).items()}
        top = sorted(rates.items(), key=lambda kv: -kv[1])[:4]
        print(f"{models} idle models, {wall:.1f} s: serve {100 * used['serve'] / wall:.1f}% "
              f"of a core, redis-server {100 * used['redis'] / wall:.1f}%; Redis "
              f"{sum(rates.values()):,.0f} commands/s (" +
              ", ".join(f"{k} {v:,.0f}" for k, v in top) + ")")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500,
         float(sys.argv[2]) if len(sys.argv) > 2 else 20.0)
