"""Click-noise estimates in replay: the anchor estimator against NREst, at default settings.

Every run is a ``noisyloop replay`` of the ``label`` task (the replay
runner of :mod:`app.replay.label` with the command line's parser) whose
learned events are also fed, in stream order, to a
:class:`~app.learners.noise_anchor.ProgressiveScorer`; every ``--every``
events the anchor estimate (:func:`~app.learners.noise_anchor.estimate_from_anchors`,
default settings) is computed from all the plays so far and compared with the
true rates.  Baseline: NREst as it is (:func:`app.learners.noise.estimate_noise_rates`
with its defaults) on the last 5,000 plays every 5,000 events -- inside
``rcine`` that is the algorithm's own refresh, for ``linucb_diag`` what the
service's NREst worker does with its default buffer.

A last section measures what ``linucb_diag``'s uniform-exploration share
costs in learning: the same runs with ``uniform_share = 0``.

The estimator's defaults were tuned on seeds 0-2 and 100-102; the docs
numbers use seeds from ``--first-seed`` (1000) on.

Usage::

    .venv/bin/python bench/results_noise.py             # the docs numbers (about 6 CPU minutes)
    .venv/bin/python bench/results_noise.py --quick     # one seed, no NREst baseline
    .venv/bin/python bench/results_noise.py --render-only

Writes ``<data>/noise.json`` and ``<out>/noise.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from app.bench.machine import machine_info
from app.cli import build_parser
from app.learners.noise import estimate_noise_rates
from app.learners.noise_anchor import ProgressiveScorer, estimate_from_anchors
from app.replay import label

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ("synsep", "digits")
ALGORITHMS = ("rcine", "linucb_diag")
NOISE = ((0.2, 0.4), (0.1, 0.3), (0.3, 0.1))
ROUNDS = 20_000
#: NREst's buffer and period: rcine's n_s and the worker's nrest_buffer defaults.
NREST_BUFFER = 5_000
TOLERANCE = 0.05


class Recorder:
    """Feeds learned events to the scorer; estimates every ``every`` events."""

    def __init__(self, n_classes: int, every: int, nrest: bool, seed: int) -> None:
        self.n_classes, self.every, self.nrest, self.seed = n_classes, every, nrest, seed
        self.scorer: ProgressiveScorer | None = None
        self.cols: dict[str, list[np.ndarray]] = {"prob": [], "score": [], "click": []}
        self.X: list[np.ndarray] = []
        self.played: list[np.ndarray] = []
        self.seen = 0
        self.anchor: list[dict[str, Any]] = []
        self.nrest_estimates: list[dict[str, Any]] = []
        self.cpu = 0.0

    def __call__(self, events: list[dict[str, Any]]) -> None:
        start = time.process_time()
        X = np.stack([e["x"] for e in events])
        played = np.array([int(e["played"]) for e in events])
        click = np.array([float(e["click"]) for e in events])
        if self.scorer is None:
            self.scorer = ProgressiveScorer(X.shape[1], self.n_classes)
        self.cols["score"].append(self.scorer.score_and_learn(X, played, click))
        self.cols["prob"].append(np.array([float(e["prob"]) for e in events]))
        self.cols["click"].append(click)
        before, self.seen = self.seen, self.seen + len(events)
        if self.seen // self.every > before // self.every:
            self._estimate()
        self.cpu += time.process_time() - start
        if self.nrest:
            self.X.append(X)
            self.played.append(played)
            if self.seen // NREST_BUFFER > before // NREST_BUFFER:
                self._nrest()

    def _estimate(self) -> None:
        cols = {k: np.concatenate(v) for k, v in self.cols.items()}
        self.cols = {k: [v] for k, v in cols.items()}
        est = estimate_from_anchors(cols["prob"], cols["score"], cols["click"], self.n_classes)
        self.anchor.append({
            "t": self.seen, "published": est.published, "reason": est.reason,
            "rho0": est.rho0, "rho1": est.rho1,
            "rho0_interval": list(est.rho0_interval), "rho1_interval": list(est.rho1_interval),
            "n_explored": est.n_explored, "n_top": est.n_top, "support": est.support,
        })

    def _nrest(self) -> None:
        X = np.concatenate(self.X)[-NREST_BUFFER:]
        played = np.concatenate(self.played)[-NREST_BUFFER:]
        click = np.concatenate(self.cols["click"])[-NREST_BUFFER:]
        self.X, self.played = [X], [played]
        est = estimate_noise_rates(X, played, click, self.n_classes,
                                   seed=self.seed * 1_000 + len(self.nrest_estimates))
        self.nrest_estimates.append({"t": self.seen, "rho0": est.rho0, "rho1": est.rho1,
                                     "ok": est.ok})


def run_one(dataset: str, algorithm: str, rho: tuple[float, float], seed: int, every: int,
            nrest: bool, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """One replay with the anchor estimates (and NREst's) recorded."""
    argv = ["replay", "--dataset", dataset, "--algorithm", algorithm, "--rounds", str(ROUNDS),
            "--rho0", str(rho[0]), "--rho1", str(rho[1]), "--no-progress"]
    if params:
        argv += ["--params", json.dumps(params)]
    args = build_parser().parse_args(argv)
    n_classes = label.setup(args, seed).n_classes
    own_nrest = algorithm == "rcine"  # rcine refreshes NREst itself (its n_s default)
    rec = Recorder(n_classes, every, nrest and not own_nrest, seed)
    start = time.process_time()
    result = label.run(args, seed, lambda _: None, rec)
    record: dict[str, Any] = {
        "dataset": dataset, "algorithm": algorithm, "rho0": rho[0], "rho1": rho[1],
        "seed": seed, "params": params or {}, "greedy_error": result.final,
        "played_error": result.extra["played_error_rate"],
        "final_window_error": result.extra["final_window_error_rate"],
        "cpu_seconds": time.process_time() - start, "anchor_cpu_seconds": rec.cpu,
        "anchor": rec.anchor,
    }
    if nrest:
        record["nrest"] = (result.extra.get("noise_estimates", []) if own_nrest
                           else rec.nrest_estimates)
    print(f"  {dataset} {algorithm} rho={rho} seed={seed} {params or ''}: "
          f"error {result.final:.3f}, {record['cpu_seconds']:.1f} s", flush=True)
    return record


def _err(entry: dict[str, Any], run: dict[str, Any]) -> float:
    return max(abs(entry["rho0"] - run["rho0"]), abs(entry["rho1"] - run["rho1"]))


def _covers(entry: dict[str, Any], run: dict[str, Any], rate: str) -> bool:
    low, high = entry[f"{rate}_interval"]
    return bool(low <= run[rate] <= high)


def _machine(info: dict[str, Any]) -> str:
    return f"{info['cpu_model']}, {info['nproc']} CPUs, python {info['python']}"


def render(data: dict[str, Any]) -> str:
    """The Markdown page from the JSON."""
    runs = [r for r in data["runs"] if not r["params"]]
    lines = [
        "# Click-noise estimates: anchors against NREst",
        "",
        (f"Made by `.venv/bin/python bench/results_noise.py` ({_machine(data['machine'])}; "
        f"{data['cpu_seconds']:.0f} s of CPU); `--render-only` rewrites this page from "
        "`bench/results/noise.json`."),
        "",
        ("Each run replays 20,000 events of a stream (`synsep`: 9 classes, 400 binary "
        "features; `digits`: 10 classes, 64 features) through a learner at its default "
        "settings, with clicks flipped at the rates (ρ0, ρ1). Every "
        f"{data['every']:,} events the anchor estimator computes the rates, with 95% "
        "intervals per rate (both hold together with probability at least 90%), from all "
        "the plays so far; it publishes them only when both "
        "intervals are at most 0.1 wide. NREst (as it is) refits on the last 5,000 "
        f"plays every 5,000 events. Seeds {data['seeds'][0]}-{data['seeds'][-1]} (the "
        "estimator's defaults were chosen on other seeds)."),
        "",
        "## Anchor estimator per stream, learner and noise",
        "",
        ("*published*: refreshes with a published estimate / refreshes; *first*: events "
        "at the first published estimate; *error at 20k*: largest error of either rate at "
        "20,000 events over the seeds; *worst published*: largest error of any published "
        "estimate; *coverage*: share of published refreshes whose interval holds the true "
        "ρ0 / ρ1 / both; *NREst at 20k*: NREst's largest error at 20,000 events."),
        "",
        ("| stream | learner | (ρ0, ρ1) | seeds | published | first | error at 20k | "
        "worst published | coverage ρ0 / ρ1 / both | NREst at 20k |"),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str, float, float], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["dataset"], r["algorithm"], r["rho0"], r["rho1"]), []).append(r)
    totals = {"cases": 0, "c0": 0, "c1": 0, "both": 0, "final_ok": 0, "finals": 0}
    for (ds, alg, r0, r1), rs in groups.items():
        pubs = [(e, r) for r in rs for e in r["anchor"] if e["published"]]
        n_ref = sum(len(r["anchor"]) for r in rs)
        firsts = [next((e["t"] for e in r["anchor"] if e["published"]), None) for r in rs]
        finals = [_err(r["anchor"][-1], r) for r in rs if r["anchor"][-1]["published"]]
        c0 = sum(_covers(e, r, "rho0") for e, r in pubs)
        c1 = sum(_covers(e, r, "rho1") for e, r in pubs)
        both = sum(_covers(e, r, "rho0") and _covers(e, r, "rho1") for e, r in pubs)
        totals["cases"] += len(pubs)
        totals["c0"], totals["c1"], totals["both"] = (
            totals["c0"] + c0, totals["c1"] + c1, totals["both"] + both)
        totals["finals"] += len(rs)
        totals["final_ok"] += sum(e <= TOLERANCE for e in finals)
        nrest = [max((_err(e, r) for e in r.get("nrest", []) if e["t"] == ROUNDS),
                     default=float("nan")) for r in rs]
        first = "never" if None in firsts else f"{min(firsts):,}-{max(firsts):,}"  # type: ignore[type-var]
        final = (f"{max(finals):.3f}" if len(finals) == len(rs)
                 else f"{len(rs) - len(finals)} unpublished")
        worst = max((_err(e, r) for e, r in pubs), default=float("nan"))
        cov = (f"{c0 / len(pubs):.0%} / {c1 / len(pubs):.0%} / {both / len(pubs):.0%}"
               if pubs else "-")
        lines.append(f"| {ds} | {alg} | ({r0}, {r1}) | {len(rs)} | {len(pubs)} / {n_ref} | "
                     f"{first} | {final} | {worst:.3f} | {cov} | {max(nrest):.3f} |")
    n = max(totals["cases"], 1)
    lines += [
        "",
        (f"Over all {totals['cases']} published (stream, seed, refresh) cases the "
        f"intervals held ρ0 in {totals['c0'] / n:.1%}, ρ1 in {totals['c1'] / n:.1%} and both "
        f"in {totals['both'] / n:.1%}; at 20,000 events {totals['final_ok']} of "
        f"{totals['finals']} runs published an estimate within {TOLERANCE} of both rates."),
        "",
        "## Cost",
        "",
    ]
    anchor_cpu = [r["anchor_cpu_seconds"] for r in runs]
    lines.append(
        f"Scoring every play and estimating every {data['every']:,} events took "
        f"{np.mean(anchor_cpu):.2f} s of CPU per 20,000 events on average "
        f"(at most {max(anchor_cpu):.2f} s; the budget is 2 s), the replay of the learner "
        f"itself {np.mean([r['cpu_seconds'] - r['anchor_cpu_seconds'] for r in runs]):.1f} s. "
        "This is the work the service's trainer (scoring) and nrest role (estimating, on the "
        "same number of plays up to 20,000) do, off the request path; the service adds "
        "reading and writing the rows and the scorer's state in Redis, not measured here.")
    ablation = [r for r in data["runs"] if r["params"]]
    if ablation:
        lines += [
            "",
            "## What linucb_diag's uniform exploration costs",
            "",
            ("Greedy error (cumulative) and played error of `linucb_diag` with the default "
            "`uniform_share = 0.05` and with 0, mean over the seeds:"),
            "",
            ("| stream | (ρ0, ρ1) | greedy error 0.05 / 0 | played error 0.05 / 0 | "
            "last 10% greedy 0.05 / 0 |"),
            "|---|---|---|---|---|",
        ]
        for ds in DATASETS:
            for r0, r1 in NOISE:
                def pick(share_zero: bool, key: str, ds: str = ds, r0: float = r0,
                         r1: float = r1) -> float:
                    return float(np.mean([
                        r[key] for r in data["runs"]
                        if (r["dataset"], r["algorithm"], r["rho0"], r["rho1"])
                        == (ds, "linucb_diag", r0, r1) and bool(r["params"]) == share_zero]))
                lines.append(
                    f"| {ds} | ({r0}, {r1}) | {pick(False, 'greedy_error'):.3f} / "
                    f"{pick(True, 'greedy_error'):.3f} | {pick(False, 'played_error'):.3f} / "
                    f"{pick(True, 'played_error'):.3f} | {pick(False, 'final_window_error'):.3f}"
                    f" / {pick(True, 'final_window_error'):.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2, help="seeds per configuration")
    parser.add_argument("--first-seed", type=int, default=1_000,
                        help="first seed (the defaults were tuned on 0-2 and 100-102)")
    parser.add_argument("--every", type=int, default=2_500, help="events between estimates")
    parser.add_argument("--quick", action="store_true", help="one seed, no NREst baseline")
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument("--data", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    args = parser.parse_args(argv)
    path = args.data / "noise.json"
    if not args.render_only:
        start = time.process_time()
        seeds = range(args.first_seed, args.first_seed + (1 if args.quick else args.seeds))
        runs = [run_one(ds, alg, rho, seed, args.every, nrest=not args.quick)
                for ds in DATASETS for alg in ALGORITHMS for rho in NOISE for seed in seeds]
        runs += [run_one(ds, "linucb_diag", rho, seed, args.every, nrest=False,
                         params={"uniform_share": 0.0})
                 for ds in DATASETS for rho in NOISE for seed in seeds]
        data = {"machine": machine_info(), "every": args.every, "seeds": list(seeds),
                "runs": runs,
                "cpu_seconds": time.process_time() - start}
        path.write_text(json.dumps(data, indent=1, default=float))
    data = json.loads(path.read_text())
    page = render(data)
    (args.out / "noise.md").write_text(page)
    print(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
