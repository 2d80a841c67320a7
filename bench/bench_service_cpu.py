"""Server CPU per 1000 decisions / feedback events: batch predict and batch feedback over HTTP.

Starts ``noisyloop serve`` (the code of the current directory) on a
temporary data directory, creates a ``label`` / ``rcnbf`` model (d = 64,
K = 10) and sends ``N`` batch predicts of 1000 instances, then their 1000-event
feedback batches, one request at a time with :class:`noisyloop_client.Client`.
Prints wall-clock rates and the serve process's CPU time (user + system from
``/proc``, 10 ms ticks; the in-process trainer is included during the
feedback phase).  On a shared machine the CPU figure is the steadier one.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_service_cpu.py 20

With ``NL_PYSPY=FILE`` the server runs under ``py-spy record -f raw -o FILE``
(collapsed stacks for a profile; the CPU figure then counts py-spy instead).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
from noisyloop_client import Client

from app.bench.machine import linux_process_cpu_seconds
from app.store.embedded import free_port


def main(n: int) -> None:
    port, token = free_port(), "bench-token-" + os.urandom(12).hex()
    url = f"http://127.0.0.1:{port}"
    spy = os.environ.get("NL_PYSPY")
    pre = [os.path.join(os.path.dirname(sys.executable), "py-spy"), "record", "-r", "250",
           "-f", "raw", "-o", spy, "--"] if spy else []
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "NOISYLOOP_ADMIN_TOKEN": token, "OPENBLAS_NUM_THREADS": "1",
               "NOISYLOOP_LOG_LEVEL": "WARNING"}
        proc = subprocess.Popen([*pre, sys.executable, "-m", "app.cli", "serve", "--port",
                                 str(port), "--data-dir", data], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            key = None
            for _ in range(200):
                try:
                    with Client(url, admin_token=token) as admin:
                        key = admin.create_tenant("bench")["api_key"]
                    break
                except Exception:
                    time.sleep(0.3)
            assert key is not None, "serve did not start"
            with Client(url, key) as c:
                c.create_model("m", "label", 64, algorithm="rcnbf", n_classes=10, seed=0)
                X = np.random.default_rng(0).random((1000, 64))
                c.predict_batch("m", X)
                t, cpu = time.perf_counter(), linux_process_cpu_seconds(proc.pid)
                ids: list[str] = []
                for _ in range(n):
                    ids += [str(p["event_id"]) for p in c.predict_batch("m", X)]
                wall, used = time.perf_counter() - t, linux_process_cpu_seconds(proc.pid) - cpu
                print(f"batch predict: {n * 1000 / wall:,.0f} decisions/s wall, server CPU "
                      f"{used / n * 1e3:.1f} ms per 1000 = {n * 1000 / used:,.0f} per server CPU-s")
                batches = [[{"event_id": e, "click": bool(j % 3 == 0)}
                            for j, e in enumerate(ids[i:i + 1000])]
                           for i in range(0, len(ids), 1000)]
                t, cpu = time.perf_counter(), linux_process_cpu_seconds(proc.pid)
                for batch in batches:
                    c.feedback_batch("m", batch)
                wall, used = time.perf_counter() - t, linux_process_cpu_seconds(proc.pid) - cpu
                print(f"batch feedback: {n * 1000 / wall:,.0f} events/s wall, server CPU "
                      f"{used / n * 1e3:.1f} ms per 1000 (trainer included) = "
                      f"{n * 1000 / used:,.0f} per server CPU-s")
        finally:
            proc.send_signal(signal.SIGINT if spy else signal.SIGTERM)
            proc.wait(60)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
