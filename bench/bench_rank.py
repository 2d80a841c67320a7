"""The ``rank`` task's speed: in process against Vowpal Wabbit, and through HTTP.

**In process** (``inprocess``): :class:`app.sim.rank.RankSimulator` with 50
candidates per request, 16 context features (the constant 1 included) and 16
action features, click noise (0.03, 0.3); the default learner (``ridge_pl``,
given the click-noise rates) and VW ``--cb_explore_adf -q sa`` (a shared line
``shared |s <context>``, one line ``|a <action features>`` per candidate,
the two namespaces crossed) rank the same requests and see clicks drawn from
the same uniforms (common random numbers per request and slot), so that the
streams differ only by the learners' choices.  Each learner's ``decide`` +
``learn`` per request is timed by CPU time (:func:`time.process_time`; the
wall clock counts other processes' time on a shared machine); VW's text
examples are built before its timer (VW's own cost) and, separately, timed
as what a Python caller pays.  With ``slots`` > 1, VW fills the slots by
drawing from its pmf renormalised over the candidates left and learns one
example per shown slot (its cost ``1 - click``, the conditional
probability); with one slot (the default) that is plain ``cb_explore_adf``.
The quality is the share of the random-to-oracle gap the played rankings
close over the last quarter of the rounds (:func:`app.sim.rank.gap_closed`).
Goal: ridge_pl at least 5x VW's requests per CPU-second at an equal or
higher share.

**Through HTTP** (``http``): ``noisyloop serve`` on a temporary data
directory with a rank model (16 + 16 features, 3 slots) and a ``label``
model (16 features, 10 classes, the task's default learner); phases of
closed-loop traffic take turns in every round: single ``predict`` and single
``rank`` requests (20 candidates) at the same concurrency, and
``rank_batch`` (100 requests of 50 candidates each).  Reports requests/s,
candidate scorings/s of the batch (requests x candidates / wall time), and
the single-rank / single-predict ratio of the same rounds.  Goals: batch
rank >= 100,000 scorings/s, single rank >= 50% of single predict.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_rank.py \\
        --json bench/results/rank/bench-1.json
    .venv/bin/python bench/bench_rank.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from noisyloop_client import AsyncClient, Client

from app.bench.machine import cpu_shares, cpu_times, machine_info, process_cpu_seconds
from app.bench.results import write_results
from app.bench.service import client_closed_loop, server_process
from app.bench.vw import vw_available, vw_text
from app.learners.registry import build
from app.sim.rank import DEFAULT_RHO, RankSimulator, Request, gap_closed
from app.store.embedded import free_port

DX, DA, CANDIDATES = 16, 16, 50
THETA = (1.0, 0.6, 0.35)
VW_ARGS = "--cb_explore_adf -q sa"
GOAL_SPEEDUP, GOAL_SCORINGS, GOAL_SINGLE_RATIO = 5.0, 100_000.0, 0.5


# -- in process ---------------------------------------------------------------------------

class Stream:
    """Requests of the simulator and the uniforms their clicks are drawn from."""

    def __init__(self, rounds: int, slots: int, seed: int) -> None:
        self.sim = RankSimulator(n_features=DX, n_action_features=DA, n_items=2_000,
                                 n_candidates=CANDIDATES, slots=slots, theta=THETA[:slots],
                                 churn_every=max(1, rounds // 30), seed=seed)
        self.requests = [self.sim.request() for _ in range(rounds)]
        self.u = np.random.default_rng(seed + 1).random((rounds, slots, 3))

    def clicks(self, t: int, ranking: np.ndarray) -> np.ndarray:
        """Observed clicks of the ranking (position bias, relevance, click noise)."""
        k = len(ranking)
        u = self.u[t, :k]
        true = (u[:, 0] < self.sim.theta[:k]) & (u[:, 1] < self.requests[t].relevance[ranking])
        flipped = np.where(true, u[:, 2] < self.sim.rho1, u[:, 2] < self.sim.rho0)
        return (true ^ flipped).astype(np.float64)


def _share(stream: Stream, rankings: list[np.ndarray]) -> float:
    values = np.array([stream.sim.values(r, k) for r, k in zip(stream.requests, rankings,
                                                                strict=True)])
    tail = values[-max(1, len(values) // 4):]
    return gap_closed(tail[:, 0], tail[:, 1], tail[:, 2])


def run_ridge(stream: Stream, seed: int) -> dict[str, Any]:
    """The default learner's decide + learn per request, CPU-timed."""
    sim = stream.sim
    learner = build("rank", "ridge_pl", n_features=DX, seed=seed,
                    params={"n_action_features": DA, "slots": sim.slots,
                            "rho0": DEFAULT_RHO[0], "rho1": DEFAULT_RHO[1]})
    rankings, cpu = [], 0.0
    for t, req in enumerate(stream.requests):
        started = time.process_time()
        d = learner.decide(req.x, actions=req.actions)  # type: ignore[call-arg]
        ranking = np.array([r["index"] for r in d.output["ranking"]])
        cpu += time.process_time() - started
        clicks = stream.clicks(t, ranking)
        started = time.process_time()
        learner.learn_one({**d.context, "clicks": clicks})
        cpu += time.process_time() - started
        rankings.append(ranking)
    return {"learner": "ridge_pl (defaults)", "cpu_seconds": round(cpu, 3),
            "requests_per_cpu_second": round(len(rankings) / cpu),
            "gap_closed": round(_share(stream, rankings), 4)}


def _vw_lines(req: Request) -> tuple[str, list[str]]:
    return vw_text(req.x, adf=True), [vw_text(a, adf=False).replace("|s", "|a", 1)
                                      for a in req.actions]


def run_vw(stream: Stream, seed: int, args: str) -> dict[str, Any]:
    """VW's predict + learn per request on prebuilt text, CPU-timed; text building timed apart."""
    import vowpalwabbit

    started = time.process_time()
    texts = [_vw_lines(req) for req in stream.requests]
    text_cpu = time.process_time() - started
    vw = vowpalwabbit.Workspace(f"{args} --quiet --random_seed {seed}")
    draw = np.random.default_rng(seed)
    rankings, cpu = [], 0.0
    for t, (shared, actions) in enumerate(texts):
        u = draw.random(stream.sim.slots)
        started = time.process_time()
        pmf = np.asarray(vw.predict([shared, *actions]), dtype=np.float64)
        left, chosen, probs = np.ones(len(pmf), dtype=bool), [], []
        for k in range(stream.sim.slots):
            p = np.where(left, pmf, 0.0)
            p /= p.sum()
            pick = min(int(np.searchsorted(np.cumsum(p), u[k], side="right")), len(p) - 1)
            while not left[pick]:
                pick -= 1
            chosen.append(pick)
            probs.append(p[pick])
            left[pick] = False
        cpu += time.process_time() - started
        ranking = np.array(chosen)
        clicks = stream.clicks(t, ranking)
        started = time.process_time()
        for a, prob, click in zip(chosen, probs, clicks, strict=True):
            labelled = list(actions)
            labelled[a] = f"0:{1.0 - click}:{max(prob, 1e-6)} {actions[a]}"
            vw.learn([shared, *labelled])
        cpu += time.process_time() - started
        rankings.append(ranking)
    vw.finish()
    n = len(rankings)
    return {"learner": f"vw {args}", "cpu_seconds": round(cpu, 3),
            "requests_per_cpu_second": round(n / cpu),
            "requests_per_cpu_second_with_text": round(n / (cpu + text_cpu)),
            "text_cpu_seconds": round(text_cpu, 3),
            "gap_closed": round(_share(stream, rankings), 4)}


def inprocess(rounds: int, slots: int, seed: int, vw_args: str) -> dict[str, Any]:
    """Both learners on the same stream; the speed and share ratios of this run."""
    stream = Stream(rounds, slots, seed)
    ridge = run_ridge(stream, seed)
    out: dict[str, Any] = {"config": {"rounds": rounds, "candidates": CANDIDATES,
                                      "context_features": DX, "action_features": DA,
                                      "slots": slots, "theta": THETA[:slots],
                                      "click_noise": DEFAULT_RHO, "seed": seed,
                                      "gap_rounds": max(1, rounds // 4)},
                           "ridge_pl": ridge}
    if not vw_available():
        out["vw"] = None
        return out
    vw = run_vw(stream, seed, vw_args)
    speedup = ridge["requests_per_cpu_second"] / vw["requests_per_cpu_second"]
    out["vw"] = vw
    out["ratios"] = {
        "speed_over_vw": round(speedup, 2),
        "speed_over_vw_with_text": round(ridge["requests_per_cpu_second"]
                                         / vw["requests_per_cpu_second_with_text"], 2),
        "gap_closed_minus_vw": round(ridge["gap_closed"] - vw["gap_closed"], 4)}
    out["goal"] = {"target": f">= {GOAL_SPEEDUP}x VW at an equal or higher share",
                   "met": speedup >= GOAL_SPEEDUP and ridge["gap_closed"] >= vw["gap_closed"]}
    return out


# -- through HTTP -------------------------------------------------------------------------

RANK, PREDICT = "bench-rank", "bench-predict"


def _request(rng: np.random.Generator, n: int) -> dict[str, Any]:
    return {"features": [1.0, *rng.normal(0, 0.25, DX - 1).round(4).tolist()],
            "actions": [{"id": f"item-{i}", "features": a}
                        for i, a in enumerate(rng.normal(0, 0.25, (n, DA)).round(4).tolist())]}


async def _phases(url: str, key: str, pid: int, rounds: int, seconds: float,
                  concurrency: int, single_candidates: int, batch_requests: int, seed: int
                  ) -> dict[str, list[dict[str, Any]]]:
    rng = np.random.default_rng(seed)
    singles = [_request(rng, single_candidates) for _ in range(64)]
    contexts = [s["features"] for s in singles]
    batches = [[_request(rng, CANDIDATES) for _ in range(batch_requests)] for _ in range(4)]
    out: dict[str, list[dict[str, Any]]] = {"predict": [], "rank": [], "rank_batch": []}
    async with AsyncClient(url, key, timeout=120) as c:
        i = 0

        async def predict() -> None:
            nonlocal i
            i += 1
            await c.predict(PREDICT, contexts[i % 64])

        async def rank() -> None:
            nonlocal i
            i += 1
            req = singles[i % 64]
            await c.rank(RANK, req["features"], req["actions"])

        async def rank_batch() -> None:
            nonlocal i
            i += 1
            await c.rank_batch(RANK, batches[i % 4])

        for r in range(rounds + 1):
            for name, send, conc in (("predict", predict, concurrency),
                                     ("rank", rank, concurrency),
                                     ("rank_batch", rank_batch, 2)):
                used = process_cpu_seconds(pid)
                res = await client_closed_loop(send, conc, seconds if r else min(seconds, 1.0))
                after = process_cpu_seconds(pid)
                res["server_cpu_seconds"] = (None if used is None or after is None
                                             else round(after - used, 2))
                if res["errors"]:
                    raise RuntimeError(f"{name}: {res['errors']} failed requests")
                if r:  # round 0 warms caches and connections
                    out[name].append(res)
    return out


def http(rounds: int, seconds: float, concurrency: int, seed: int) -> dict[str, Any]:
    """Start ``noisyloop serve``, run the phases, stop it; per-phase figures and ratios."""
    token = "bench-admin-token-" + os.urandom(12).hex()
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NOISYLOOP_LOG_LEVEL": "WARNING",
           "NOISYLOOP_ADMIN_TOKEN": token}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    single_candidates, batch_requests = 20, 100
    with tempfile.TemporaryDirectory(prefix="nl-bench-") as tmp:
        data = Path(tmp)
        with server_process([sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                             "--data-dir", str(data)], env, url, "/healthz",
                            data / "serve.log") as proc:
            with Client(url, admin_token=token) as admin:
                key = admin.create_tenant("bench")["api_key"]
            with Client(url, key) as c:
                c.create_model(RANK, "rank", DX, n_action_features=DA, slots=3, seed=seed)
                c.create_model(PREDICT, "label", DX, n_classes=10, seed=seed)
            before = cpu_times()
            phases = asyncio.run(_phases(url, key, proc.pid, rounds, seconds, concurrency,
                                         single_candidates, batch_requests, seed))
            shares = cpu_shares(before, cpu_times())
    per_batch = batch_requests * CANDIDATES
    predict = [p["per_second"] for p in phases["predict"]]
    rank = [p["per_second"] for p in phases["rank"]]
    scorings = [p["per_second"] * per_batch for p in phases["rank_batch"]]
    ratios = [r / p for r, p in zip(rank, predict, strict=True)]
    per_cpu = [p["requests"] * per_batch / p["server_cpu_seconds"]
               for p in phases["rank_batch"] if p["server_cpu_seconds"]]
    summary = {
        "predict_per_second": predict, "rank_per_second": rank,
        "rank_over_predict_per_round": [round(v, 3) for v in ratios],
        "rank_over_predict_median": round(statistics.median(ratios), 3),
        "batch_scorings_per_second": [round(v) for v in scorings],
        "batch_scorings_per_second_median": round(statistics.median(scorings)),
        "batch_scorings_per_server_cpu_second": [round(v) for v in per_cpu]}
    return {"config": {"rounds": rounds, "seconds_per_phase": seconds,
                       "concurrency": concurrency, "single_candidates": single_candidates,
                       "batch_requests": batch_requests, "batch_candidates": CANDIDATES,
                       "context_features": DX, "action_features": DA, "slots": 3,
                       "predict_model": "label, 10 classes, default learner"},
            "phases": phases, "summary": summary, "cpu_percent_during_run": shares,
            "goals": {
                "batch_scorings_per_second": {
                    "value": summary["batch_scorings_per_second_median"],
                    "target": f">= {GOAL_SCORINGS:,.0f}",
                    "met": summary["batch_scorings_per_second_median"] >= GOAL_SCORINGS},
                "single_rank_over_single_predict": {
                    "value": summary["rank_over_predict_median"],
                    "target": f">= {GOAL_SINGLE_RATIO}",
                    "met": summary["rank_over_predict_median"] >= GOAL_SINGLE_RATIO}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (short phases)")
    parser.add_argument("--part", choices=("all", "inprocess", "http"), default="all")
    parser.add_argument("--rounds", type=int, help="in-process requests (default 20,000)")
    parser.add_argument("--slots", type=int, default=1, help="slots of the in-process run")
    parser.add_argument("--vw-args", default=VW_ARGS)
    parser.add_argument("--http-rounds", type=int, help="rounds of HTTP phases (default 5)")
    parser.add_argument("--seconds", type=float, help="seconds per HTTP phase (default 4)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args()
    report: dict[str, Any] = {"benchmark": "rank", "machine": machine_info(),
                              "command": " ".join(sys.argv)}
    if args.part in ("all", "inprocess"):
        rounds = args.rounds or (3_000 if args.quick else 20_000)
        ip = report["inprocess"] = inprocess(rounds, args.slots, args.seed, args.vw_args)
        for name in ("ridge_pl", "vw"):
            if ip.get(name):
                print(json.dumps(ip[name]))
        if "ratios" in ip:
            print(f"in process: {ip['ratios']}; goal {'met' if ip['goal']['met'] else 'NOT met'}")
    if args.part in ("all", "http"):
        rep = report["http"] = http(args.http_rounds or (2 if args.quick else 5),
                                    args.seconds or (1.5 if args.quick else 4.0),
                                    args.concurrency, args.seed)
        print(json.dumps(rep["summary"]))
        print("http goals:", json.dumps(rep["goals"]), "cpu:",
              json.dumps(rep["cpu_percent_during_run"]))
    if args.json is not None:
        write_results(args.json, report)


if __name__ == "__main__":
    main()
