"""A world that changes, through the service: the rank task with each ``drift.action``.

``noisyloop serve`` on a temporary data directory; a ``rank`` model at its
defaults (``ridge_pl``, ``half_life`` null: no forgetting) is given the requests of
:class:`app.sim.rank.RankSimulator` (20 candidates, 3 slots, 8 + 8 features,
click noise and position bias as ``replay --task rank``) in batches of 100
(``rank_batch``), the clicks of each batch posted as feedback and ``sync``
waited for before the next, as ``replay --service`` does for labels.  Runs:

* ``abrupt``: the relevance is redrawn after 20,000 requests; the share of
  the random-to-oracle gap closed over requests 2,500-7,500 after the
  change, for each ``drift.action`` (``alert``: the model only forgets;
  ``recover``: the trainer refits it on the events since the estimated
  change);
* ``fresh``: a new model on the new world, its own requests 2,500-7,500
  (the recovery is the ratio of the two);
* ``stationary``: 30,000 requests of one world, the last 5,000 (what a
  false alarm would cost) and the detections.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/service_drift.py \\
        --json bench/results/drift/service-rank.json

Prints one JSON line per run; ``--json`` writes them all.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from noisyloop_client import Client

from app.bench.service import server_process
from app.replay.drift import RECOVERY
from app.sim.drift import Drift
from app.sim.rank import DEFAULT_RHO, DEFAULT_THETA, RankSimulator, gap_closed
from app.store.embedded import free_port

BATCH = 100
CHANGE_AT = 20_000
TAIL = 5_000


def run(url: str, key: str, action: str, drift: Drift, rounds: int, seed: int
        ) -> dict[str, Any]:
    """One model through the service; the gap closed per request and its drift report."""
    sim = RankSimulator(n_features=8, n_action_features=8, n_candidates=20, slots=3,
                        churn=0.1, churn_every=1_000, theta=DEFAULT_THETA, rho0=DEFAULT_RHO[0],
                        rho1=DEFAULT_RHO[1], seed=seed, drift=drift)
    model_id = f"drift-{action}-{drift.change_at}-{seed}"
    values = np.zeros((rounds, 3))
    started = time.monotonic()
    with Client(url, key, timeout=120) as client:
        client.create_model(model_id, "rank", sim.n_features,
                            n_action_features=sim.n_action_features, slots=sim.slots,
                            params={"rho0": sim.rho0, "rho1": sim.rho1}, seed=seed)
        httpx.put(f"{url}/v1/models/{model_id}/drift", json={"action": action},
                  headers={"Authorization": f"Bearer {key}"}).raise_for_status()
        for start in range(0, rounds, BATCH):
            requests = [sim.request() for _ in range(min(BATCH, rounds - start))]
            answers = client.rank_batch(model_id, [
                {"features": r.x.tolist(),
                 "actions": [{"id": str(i), "features": a.tolist()}
                             for i, a in zip(r.ids, r.actions, strict=True)]}
                for r in requests])
            events = []
            for k, (request, answer) in enumerate(zip(requests, answers, strict=True)):
                index = {str(i): j for j, i in enumerate(request.ids)}
                ranking = np.array([index[item["id"]] for item in answer["ranking"]])
                values[start + k] = sim.values(request, ranking)
                clicked = sim.clicks(request, ranking)
                events.append({"event_id": answer["event_id"],
                                "clicks": [answer["ranking"][s]["id"]
                                           for s in np.flatnonzero(clicked)]})
            client.feedback_batch(model_id, events)
            client.sync(model_id, timeout=120)
        model = client.get_model(model_id)
        client.delete_model(model_id)
    after = slice(drift.change_at + RECOVERY[0], drift.change_at + RECOVERY[1])
    report = model["drift"]
    return {"action": action, "change_at": drift.change_at, "rounds": rounds, "seed": seed,
            "gap_closed_after_change": (gap_closed(*values[after].T)
                                        if after.stop <= rounds else None),
            "gap_closed_tail": gap_closed(*values[-TAIL:].T),
            "detections": report["detections"],
            "history": report["history"], "version": model["version"],
            "events_applied": model["stats"]["events_applied"],
            "seconds": round(time.monotonic() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--actions", default="recover,alert")
    parser.add_argument("--runs", default="abrupt,fresh,stationary")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    token = "bench-admin-token-" + os.urandom(12).hex()
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NOISYLOOP_LOG_LEVEL": "WARNING",
           "NOISYLOOP_ADMIN_TOKEN": token}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    plan = {"abrupt": [(a, Drift("abrupt", CHANGE_AT), CHANGE_AT + RECOVERY[1])
                       for a in args.actions.split(",")],
            "fresh": [("alert", Drift("abrupt", 0), RECOVERY[1])],
            "stationary": [(a, Drift("abrupt", 10**9), 30_000) for a in args.actions.split(",")]}
    out = []
    with tempfile.TemporaryDirectory(prefix="nl-drift-") as tmp:
        data = Path(tmp)
        with server_process([sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                             "--data-dir", str(data)], env, url, "/healthz",
                            data / "serve.log"):
            with Client(url, admin_token=token) as admin:
                key = admin.create_tenant("bench")["api_key"]
            for name in args.runs.split(","):
                for action, drift, rounds in plan[name]:
                    out.append({"run": name, **run(url, key, action, drift, rounds,
                                                   args.seed)})
                    print(json.dumps(out[-1]), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
