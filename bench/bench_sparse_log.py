"""Bytes and ``serve``'s peak memory of reading a sparse model's decision log.

Starts ``noisyloop serve`` (the code of the current directory) on a
temporary data directory, creates a ``label``/``rcnbf`` model with
``n_features`` 100,000, plays ``N`` decisions whose contexts have one
non-zero each (batches of 1,000 sparse instances) with their feedback, waits
until the log holds them all, then reads the log: one ``GET
/v1/models/{id}/log?limit=L`` (pages followed while ``X-Next-After`` says
more), a JSON Lines export and a Parquet export (``noisyloop log export``'s
writers, in this process).  Prints the bytes of the stored contexts (the
context blobs on the log's Redis stream), of each read, their ratio, and
``serve``'s resident memory before the reads and its peak while they ran
(``VmHWM`` of ``/proc/<pid>/status``, reset to the current resident size by
writing ``5`` to ``/proc/<pid>/clear_refs`` before the reads; also its peak after the one
page alone, before the exports; and first its peak from its start until the log held the
decisions, while it took them and learned them, and its resident size then), then the same for a
server-side evaluation of the ``uniform`` policy, run twice (the first starts the jobs
role's pool child): its status, DR value (or error), the
bytes Redis sent while it ran (``total_net_output_bytes`` of ``INFO stats``: the
evaluation's reads of the log, two or three passes, and whatever else ``serve``'s roles
read meanwhile) and of its result, each against the stored contexts, and the peak
growth of ``serve`` and of each of its child processes (the jobs role's process pool
runs the evaluation in a child; a child started during the evaluation counts its whole
peak).  The same script run from another checkout measures that code (the "before"
figure).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_sparse_log.py 1000 1000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import redis
from noisyloop_client import Client, NoisyloopError

from app.bench.serve import served
from app.commands.log import positioned_pages, write_jsonl
from app.commands.log_parquet import write_pages
from app.store.decisionlog import LogEntry
from app.store.keys import ModelKeys

#: The acceptance case's width.
N_FEATURES = 100_000


def memory_kb(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of ``pid`` in kB (from ``/proc``)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0])
    return out


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (from ``/proc/<pid>/task/*/children``)."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            out += [int(child), *descendants(int(child))]
    return out


def stored_context_bytes(r: redis.Redis, mk: ModelKeys) -> tuple[int, int]:
    """Events on the model's log stream and the bytes of their context blobs."""
    events = size = 0
    for entry_id, fields in r.xrange(mk.log):
        entry = LogEntry(entry_id.decode(), fields)
        for event in entry.events():
            events += 1
            size += len(event.context)
    return events, size


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def evaluate(client: Client, r: redis.Redis, pid: int, stored: int, label: str) -> None:
    """Queue an evaluation of ``uniform``, wait for it and print its outcome, the bytes
    Redis sent while it ran and of its result against ``stored``, and the peak growth of
    ``serve`` (``pid``) and of each of its children (module docstring)."""
    before_eval = {}
    for proc in (pid, *descendants(pid)):
        Path(f"/proc/{proc}/clear_refs").write_text("5")
        before_eval[proc] = memory_kb(proc)
    sent = r.info("stats")["total_net_output_bytes"]
    done: dict[str, Any]
    try:
        job = client.evaluate("wide", "uniform", rho0=0.0, rho1=0.0, bootstrap=50)
    except NoisyloopError as exc:
        done = {"status": f"refused (HTTP {exc.status}, {exc.code})", "error": exc.message}
    else:
        for _ in range(600):
            done = client.evaluation("wide", job["job_id"])
            if done["status"] in ("done", "failed"):
                break
            time.sleep(0.5)
    sent = r.info("stats")["total_net_output_bytes"] - sent
    growth = {}
    for proc in (pid, *descendants(pid)):
        start_kb = before_eval.get(proc, {"VmRSS": 0})["VmRSS"]
        growth[proc] = (memory_kb(proc)["VmHWM"] - start_kb) / 1024
    result: dict[str, Any] = done  # the result's fields are the job's
    dr = (result.get("dr") or {}).get("value")
    outcome = done.get("error") or f"n {result.get('n')}, DR {dr}"
    print(f"  evaluation (uniform, {label}): {done['status']} {outcome}")
    print(f"    Redis sent {sent:,} B while it ran = {sent / stored:.2f}x the stored "
          f"contexts; its result {len(json.dumps(done)):,} B = "
          f"{len(json.dumps(done)) / stored:.2f}x")
    names = {proc: "serve" if proc == pid else f"child {proc}"
             + ("" if proc in before_eval else " (new: its whole peak)") for proc in growth}
    print("    peak growth: " + ", ".join(f"{names[proc]} {mb:,.1f} MB"
                                         for proc, mb in growth.items()))



def main(n: int, limit: int) -> None:
    with served("acme") as serve:
        client = Client(serve.url, serve.key, timeout=600.0)
        client.create_model("wide", "label", N_FEATURES, algorithm="rcnbf", n_classes=3, seed=0)
        request_bytes = 0
        for start in range(0, n, 1000):
            instances = [{"indices": [(7919 * i) % N_FEATURES], "values": [1.0]}
                         for i in range(start, min(n, start + 1000))]
            request_bytes += len(json.dumps({"instances": instances}))
            played = client.predict_batch("wide", instances)
            client.feedback_batch("wide", [
                {"event_id": p["event_id"], "click": p["label"] == 1} for p in played])
        r = redis.Redis(unix_socket_path=str(next(serve.data.rglob("redis.sock"))))
        mk = ModelKeys("acme", "wide")
        events = stored = 0
        for _ in range(600):
            try:
                client.sync("wide")
            except NoisyloopError as exc:  # a loaded machine: the wait below goes on
                if exc.status != 504:
                    raise
            events, stored = stored_context_bytes(r, mk)
            if events >= n:
                break
            time.sleep(0.5)
        assert events == n, f"the log holds {events} of {n} events"
        pid = serve.proc.pid
        taken = memory_kb(pid)
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        before = memory_kb(pid)
        sizes: dict[str, int] = {}
        start_t = time.perf_counter()
        page = next(iter(client.log_pages("wide", limit=limit)))
        sizes[f"GET log?limit={limit} (one page)"] = len(page)
        alone = memory_kb(pid)
        page_wall = time.perf_counter() - start_t
        out = serve.data / "export"
        out.mkdir()
        lines = write_jsonl(client.log_pages("wide"), out / "log.jsonl", lambda k: None)
        sizes["JSON Lines export"] = (out / "log.jsonl").stat().st_size
        args = argparse.Namespace(model="wide", since=None, until=None)
        write_pages(positioned_pages(client, args, None), out / "parquet", 0, lambda k: None)
        sizes["Parquet export"] = tree_bytes(out / "parquet")
        wall = time.perf_counter() - start_t
        after = memory_kb(pid)
        print(f"{n} decisions of n_features {N_FEATURES:,}, one non-zero each: requests "
              f"{request_bytes:,} B; stored contexts {stored:,} B ({stored / n:,.0f} B "
              f"each); JSON Lines lines exported {lines}")
        print(f"  serve while the decisions were taken and learned: peak "
              f"{taken['VmHWM'] / 1024:,.0f} MB (since it started), resident "
              f"{taken['VmRSS'] / 1024:,.0f} MB after")
        for name, size in sizes.items():
            print(f"  {name}: {size:,} B = {size / stored:.2f}x the stored contexts")
        print(f"  serve while the one page was read: peak grew "
              f"{(alone['VmHWM'] - before['VmRSS']) / 1024:,.1f} MB ({page_wall:.1f} s)")
        print(f"  serve: resident {before['VmRSS'] / 1024:,.0f} MB before the reads, peak "
              f"{after['VmHWM'] / 1024:,.0f} MB while they ran: grew "
              f"{(after['VmHWM'] - before['VmRSS']) / 1024:,.1f} MB ({wall:.1f} s)")
        for label in ("first", "again"):
            evaluate(client, r, pid, stored, label)
        client.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000,
         int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
