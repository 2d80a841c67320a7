"""Click-noise estimates in replay: what ``noisyloop replay`` publishes, and the estimators
compared.

``--part replay`` (the page's main table): ``noisyloop replay`` itself, at its
defaults (the anchor estimator, as the service; the same schedule and publish
rule, :mod:`app.learners.noise_publish`), for ``rcine`` and ``linucb_diag``
on ``synsep`` and ``digits`` at three noise settings, 20,000 events, two
seeds per case (``--repeats 2``); the table is read from the command's own
``noise_estimates`` (every estimate with its status and interval).

``--part ablation``: what ``linucb_diag``'s uniform-exploration share costs
in learning, the learner given the true rates (``--estimator fixed``) with
``uniform_share`` 0.05 (the default) and 0.

``--part curve``: the error of both estimators against the events seen
(5,000 to 50,000) for ``linucb_diag`` (given the true rates,
``--estimator fixed``, so that the plays do not depend on the estimates) on
``synsep``, ``digits`` and ``synsep20`` (SynSep with 20 labels) at four noise
settings: the learned events are also fed, in stream order, to a
:class:`~app.learners.noise_anchor.ProgressiveScorer`; the anchor estimate is
taken at those counts and NREst on the last 5,000 plays at each: as it is,
and with its network trained as the paper trains it (:meth:`MLPClickModel.paper
<app.learners.noise.MLPClickModel.paper>`), with raw and with standardised
inputs.

The estimator's defaults were tuned on seeds 0-2 and 100-102; the docs
numbers use seeds from ``--first-seed`` (1000) on.

Usage::

    .venv/bin/python bench/results_noise.py --part replay    # the replay command's estimates
    .venv/bin/python bench/results_noise.py --part ablation  # uniform share 0.05 against 0
    .venv/bin/python bench/results_noise.py --part curve     # error curve (about 7 CPU minutes)
    .venv/bin/python bench/results_noise.py --render-only

A part rewrites its own runs in ``noise.json`` and keeps the others'.

Writes ``<data>/noise.json`` and ``<out>/noise.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.bench.machine import machine_info
from app.cli import build_parser
from app.commands.replay import replay
from app.learners.noise import MLPClickModel, estimate_noise_rates
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
#: The error curve: streams, noise settings, event counts, seeds.
CURVE_DATASETS = ("synsep", "digits", "synsep20")
CURVE_NOISE = ((0.1, 0.1), (0.2, 0.4), (0.4, 0.2), (0.3, 0.3))
CURVE_MARKS = (5_000, 10_000, 20_000, 50_000)
CURVE_SEEDS = 2
#: NREst variants of the curve: JSON key -> the click model (None: NREst's default).
NREST_VARIANTS: dict[str, Callable[[int], MLPClickModel | None]] = {
    "nrest": lambda seed: None,
    "nrest_paper": lambda seed: MLPClickModel.paper(seed=seed),
    "nrest_paper_std": lambda seed: MLPClickModel.paper(standardise=True, seed=seed),
}


def crossed(marks: Sequence[int], before: int, seen: int) -> bool:
    """Whether an event count in ``marks`` lies in ``(before, seen]``.

    >>> crossed((5, 10), 4, 6), crossed((5, 10), 5, 9)
    (True, False)
    """
    return any(before < m <= seen for m in marks)


class Recorder:
    """Feeds learned events to the scorer; estimates when the events seen pass a count in
    ``marks`` and, with ``nrest``, runs each of the NREst ``variants`` (keys of
    :data:`NREST_VARIANTS`) when they pass one in ``nrest_marks``."""

    def __init__(self, n_classes: int, marks: Sequence[int], nrest: bool, seed: int,
                 nrest_marks: Sequence[int], variants: Sequence[str] = ("nrest",)) -> None:
        self.n_classes, self.marks, self.nrest, self.seed = n_classes, marks, nrest, seed
        self.nrest_marks, self.variants = nrest_marks, variants
        self.scorer: ProgressiveScorer | None = None
        self.cols: dict[str, list[np.ndarray]] = {"prob": [], "score": [], "click": []}
        self.X: list[np.ndarray] = []
        self.played: list[np.ndarray] = []
        self.seen = 0
        self.anchor: list[dict[str, Any]] = []
        self.nrest_estimates: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        self.nrest_cpu = dict.fromkeys(variants, 0.0)
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
        if crossed(self.marks, before, self.seen):
            self._estimate()
        self.cpu += time.process_time() - start
        if self.nrest:
            self.X.append(X)
            self.played.append(played)
            if crossed(self.nrest_marks, before, self.seen):
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
        for variant in self.variants:
            entries = self.nrest_estimates[variant]
            seed = self.seed * 1_000 + len(entries)
            start = time.process_time()
            est = estimate_noise_rates(X, played, click, self.n_classes, seed=seed,
                                       model=NREST_VARIANTS[variant](seed))
            self.nrest_cpu[variant] += time.process_time() - start
            entries.append({"t": self.seen, "rho0": est.rho0, "rho1": est.rho1, "ok": est.ok})


def run_one(dataset: str, algorithm: str, rho: tuple[float, float], seed: int, every: int,
            nrest: bool, params: dict[str, Any] | None = None, rounds: int = ROUNDS,
            marks: Sequence[int] | None = None,
            variants: Sequence[str] = ("nrest",)) -> dict[str, Any]:
    """One replay of a learner given the true rates (``--estimator fixed``) with the anchor
    estimates (and those of the NREst ``variants``) recorded: every ``every`` events, or at
    the counts ``marks`` (NREst too, then)."""
    argv = ["replay", "--dataset", dataset, "--algorithm", algorithm, "--rounds", str(rounds),
            "--rho0", str(rho[0]), "--rho1", str(rho[1]), "--estimator", "fixed",
            "--no-progress"]
    if params:
        argv += ["--params", json.dumps(params)]
    args = build_parser().parse_args(argv)
    n_classes = label.setup(args, seed).n_classes
    nrest_marks = marks or range(NREST_BUFFER, rounds + 1, NREST_BUFFER)
    rec = Recorder(n_classes, marks or range(every, rounds + 1, every), nrest, seed,
                   nrest_marks, variants)
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
        record.update(rec.nrest_estimates)
        record["nrest_cpu_seconds"] = rec.nrest_cpu
    print(f"  {dataset} {algorithm} rho={rho} seed={seed} {params or ''}: "
          f"error {result.final:.3f}, {record['cpu_seconds']:.1f} s", flush=True)
    return record


def replay_argv(dataset: str, algorithm: str, rho: tuple[float, float], first_seed: int,
                seeds: int) -> list[str]:
    """The ``noisyloop replay`` command line of one case, at the command's defaults."""
    return ["replay", "--dataset", dataset, "--algorithm", algorithm,
            "--rounds", str(ROUNDS), "--rho0", str(rho[0]), "--rho1", str(rho[1]),
            "--seed", str(first_seed), "--repeats", str(seeds), "--no-progress"]


def replay_case(dataset: str, algorithm: str, rho: tuple[float, float], first_seed: int,
                seeds: int) -> dict[str, Any]:
    """One case run by the replay command; each run's published and unpublished estimates
    as the command reports them (``noise_estimates``)."""
    argv = replay_argv(dataset, algorithm, rho, first_seed, seeds)
    _, results, seconds, cpu = replay(build_parser().parse_args(argv))
    runs = [{"seed": r.seed, "greedy_error": r.final,
             "played_error": r.extra["played_error_rate"],
             "estimator": r.extra["estimator"],
             "estimates": [_entry(e) for e in r.extra.get("noise_estimates", [])]}
            for r in results]
    print(f"  noisyloop {' '.join(argv)}: {cpu:.1f} s of CPU", flush=True)
    return {"dataset": dataset, "algorithm": algorithm, "rho0": rho[0], "rho1": rho[1],
            "command": "noisyloop " + " ".join(argv), "cpu_seconds": cpu,
            "seconds": seconds, "runs": runs}


def _entry(estimate: dict[str, Any]) -> dict[str, Any]:
    """A replay's estimate in the page's form (intervals as ``rho0_interval``...)."""
    interval = estimate.get("interval") or {}
    return {"t": estimate["t"], "published": estimate["status"] == "published",
            "reason": estimate["reason"], "rho0": estimate["rho0"], "rho1": estimate["rho1"],
            "rho0_interval": interval.get("rho0"), "rho1_interval": interval.get("rho1")}


def _err(entry: dict[str, Any], run: dict[str, Any]) -> float:
    return max(abs(entry["rho0"] - run["rho0"]), abs(entry["rho1"] - run["rho1"]))


def _covers(entry: dict[str, Any], run: dict[str, Any], rate: str) -> bool:
    low, high = entry[f"{rate}_interval"]
    return bool(low <= run[rate] <= high)


def _machine(info: dict[str, Any]) -> str:
    return f"{info['cpu_model']}, {info['nproc']} CPUs, python {info['python']}"


def render(data: dict[str, Any]) -> str:
    """The Markdown page from the JSON."""
    lines = [
        "# Click-noise estimates: what replay publishes, anchors against NREst",
        "",
        (f"Made by `.venv/bin/python bench/results_noise.py` ({_machine(data['machine'])}); "
         "`--render-only` rewrites this page from `bench/results/noise.json`."),
    ]
    if "replay" in data:
        lines += render_replay(data["replay"])
    if "runs" in data:
        lines += render_ablation(data["runs"])
    if "curve" in data:
        lines += render_curve(data["curve"])
    return "\n".join(lines) + "\n"


def render_replay(rep: dict[str, Any]) -> list[str]:
    """The main table: each case's estimates as ``noisyloop replay`` reports them."""
    seeds = rep["seeds"]
    lines = [
        "",
        "## What `noisyloop replay` publishes",
        "",
        ("Each row is one command, at the replay's defaults (the anchor estimator, as the "
         "service: every 2,500 events on the newest 50,000 plays, published only when both "
         "95% intervals are at most 0.1 wide; the learner starts from rates 0 and uses each "
         "published estimate from its next batch), e.g.:"),
        "",
        f"    {rep['cases'][0]['command']} --json out.json --plot out.png",
        "",
        ("with `--dataset` `synsep` (9 classes, 400 binary features) or `digits` (10 "
         "classes, 64 features), `--algorithm` `rcine` or `linucb_diag`, and the rates "
         f"(ρ0, ρ1) below; seeds {seeds[0]}-{seeds[-1]} (`--repeats {len(seeds)}`; the "
         "estimator's defaults were chosen on other seeds). The JSON's `noise_estimates` "
         "lists every estimate (status, reason, counts, interval) and the plot draws the "
         f"published ones with their intervals; {rep['cpu_seconds']:.0f} s of CPU in all."),
        "",
        ("*published*: estimates published / estimates made; *first*: events at the first "
         "published estimate; *error at 20k*: largest error of either rate at 20,000 events "
         "over the seeds; *worst published*: largest error of any published estimate; "
         "*coverage*: share of published estimates whose interval holds the true ρ0 / ρ1 / "
         "both; *CPU*: seconds per run, learner and estimator."),
        "",
        ("| stream | learner | (ρ0, ρ1) | published | first | error at 20k | worst published | "
         "coverage ρ0 / ρ1 / both | CPU |"),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    totals = {"cases": 0, "c0": 0, "c1": 0, "both": 0, "final_ok": 0, "finals": 0}
    misses: list[str] = []
    for case in rep["cases"]:
        rs = case["runs"]
        pubs = [e for r in rs for e in r["estimates"] if e["published"]]
        n_made = sum(len(r["estimates"]) for r in rs)
        firsts = [next((e["t"] for e in r["estimates"] if e["published"]), None) for r in rs]
        last = [r["estimates"][-1] if r["estimates"] else None for r in rs]
        finals = [_err(e, case) for e in last
                  if e is not None and e["published"] and e["t"] == ROUNDS]
        c0 = sum(_covers(e, case, "rho0") for e in pubs)
        c1 = sum(_covers(e, case, "rho1") for e in pubs)
        both = sum(_covers(e, case, "rho0") and _covers(e, case, "rho1") for e in pubs)
        totals["cases"] += len(pubs)
        totals["c0"], totals["c1"], totals["both"] = (
            totals["c0"] + c0, totals["c1"] + c1, totals["both"] + both)
        totals["finals"] += len(rs)
        ok = sum(e <= TOLERANCE for e in finals)
        totals["final_ok"] += ok
        if ok < len(rs):
            misses.append(f"{case['dataset']} {case['algorithm']} ({case['rho0']}, "
                          f"{case['rho1']})")
        first = ("never" if None in firsts else
                 f"{min(firsts):,}-{max(firsts):,}")  # type: ignore[type-var]
        final = (f"{max(finals):.3f}" if len(finals) == len(rs)
                 else f"{len(rs) - len(finals)} unpublished")
        worst = max((_err(e, case) for e in pubs), default=float("nan"))
        cov = (f"{c0 / len(pubs):.0%} / {c1 / len(pubs):.0%} / {both / len(pubs):.0%}"
               if pubs else "-")
        lines.append(f"| {case['dataset']} | {case['algorithm']} | ({case['rho0']}, "
                     f"{case['rho1']}) | {len(pubs)} / {n_made} | {first} | {final} | "
                     f"{worst:.3f} | {cov} | {case['cpu_seconds'] / len(rs):.1f} |")
    n = max(totals["cases"], 1)
    lines += [
        "",
        (f"Over all {totals['cases']} published (stream, seed, estimate) cases the "
         f"intervals held ρ0 in {totals['c0'] / n:.1%}, ρ1 in {totals['c1'] / n:.1%} and both "
         f"in {totals['both'] / n:.1%}; at 20,000 events {totals['final_ok']} of "
         f"{totals['finals']} runs published an estimate within {TOLERANCE} of both rates"
         + (f" (not: {'; '.join(misses)})." if misses else ".")),
    ]
    return lines


def render_ablation(runs: list[dict[str, Any]]) -> list[str]:
    """What linucb_diag's uniform exploration costs (the learner given the true rates)."""
    lines = [
        "",
        "## What linucb_diag's uniform exploration costs",
        "",
        ("Greedy error (cumulative) and played error of `linucb_diag`, given the true rates "
         "(`--estimator fixed`), with the default `uniform_share = 0.05` and with 0, 20,000 "
         "events, mean over the seeds (`--part ablation`):"),
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
                    r[key] for r in runs
                    if (r["dataset"], r["algorithm"], r["rho0"], r["rho1"])
                    == (ds, "linucb_diag", r0, r1) and bool(r["params"]) == share_zero]))
            lines.append(
                f"| {ds} | ({r0}, {r1}) | {pick(False, 'greedy_error'):.3f} / "
                f"{pick(True, 'greedy_error'):.3f} | {pick(False, 'played_error'):.3f} / "
                f"{pick(True, 'played_error'):.3f} | {pick(False, 'final_window_error'):.3f}"
                f" / {pick(True, 'final_window_error'):.3f} |")
    return lines


def _at_marks(entries: list[dict[str, Any]], marks: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Each estimate by the count in ``marks`` it was taken at (the largest not above its
    ``t``: feedback arrives in batches, so ``t`` may pass a count by less than a batch)."""
    return {max(m for m in marks if m <= e["t"]): e for e in entries if e["t"] >= marks[0]}


def _errors(cell: list[float]) -> str:
    return f"{np.mean(cell):.3f} / {max(cell):.3f}" if cell else "-"


NREST_NAMES = {"nrest": "as it was", "nrest_paper": "as the paper trains it",
               "nrest_paper_std": "the same with standardised inputs"}
NREST_CAPTIONS = {
    "nrest": "as it was (the `nrest` estimator's defaults: at most 20 epochs, L2 1e-4)",
    "nrest_paper": ("as the paper trains it (`MLPClickModel.paper()`, the paper's Section 4 "
                    "and Appendix B as far as scikit-learn allows: up to 70 epochs, L2 0.01 "
                    "for dropout, Adam for AdaGrad)"),
    "nrest_paper_std": "the same with standardised inputs",
}


def render_curve(curve: dict[str, Any]) -> list[str]:
    """The error-curve section of the page from the JSON's ``curve``."""
    marks = curve["marks"]
    heads = " | ".join(f"{m // 1000}k" for m in marks)
    lines = [
        "",
        "## Error against events seen",
        "",
        (f"`linucb_diag` at its defaults (`uniform_share` 0.05), given the true rates "
         f"(`--estimator fixed`: the plays do not depend on the estimates), replays "
         f"{marks[-1]:,} events "
        "of `synsep`, `digits` and `synsep20` (SynSep-like with 20 labels and 400 binary "
        f"features) at four noise settings, seeds {curve['seeds'][0]}-{curve['seeds'][-1]} "
        f"({len(curve['seeds'])} per setting, {curve['cpu_seconds']:.0f} s of CPU). The "
        "anchor estimator, at its defaults, estimates from all the plays seen so far; each "
        "NREst variant refits on the last 5,000 plays at each count. Error: the larger of "
        "|ρ̂0 - ρ0| and |ρ̂1 - ρ1|, mean / max over the seeds."),
        "",
        ("Anchor estimator: error of the published estimates (`-`: none published yet; the "
        "service then says `insufficient_data` and keeps the initial rates), the share of "
        "seeds that had published, and how often the 95%-per-rate intervals held both true "
        "rates, over every estimate in the row whether published or not."),
        "",
        f"| stream | (ρ0, ρ1) | {heads} | published {heads.replace(' | ', ' / ')} | "
        "intervals hold both |",
        "|---|---|" + "---|" * len(marks) + "---|---|",
    ]
    variants = [v for v in NREST_CAPTIONS if all(v in r for r in curve["runs"])]
    nrest_lines = ["", "NREst's mean error: " + "; ".join(
        f"{'then ' if i else ''}{NREST_CAPTIONS[v]}" for i, v in enumerate(variants)) + ":",
        "", f"| stream | (ρ0, ρ1) | {heads} |", "|---|---|" + "---|" * len(marks)]
    held = total = held_pub = total_pub = 0
    for ds in curve["datasets"]:
        for r0, r1 in curve["noise"]:
            rs = [r for r in curve["runs"] if (r["dataset"], r["rho0"], r["rho1"]) == (ds, r0, r1)]
            anchor = [_at_marks(r["anchor"], marks) for r in rs]
            a_cells = [_errors([_err(a[m], r) for a, r in zip(anchor, rs, strict=True)
                                if m in a and a[m]["published"]]) for m in marks]
            published = " / ".join(
                f"{sum(m in a and a[m]['published'] for a in anchor)}" for m in marks)
            cover = [_covers(e, r, "rho0") and _covers(e, r, "rho1")
                     for a, r in zip(anchor, rs, strict=True) for e in a.values()]
            held, total = held + sum(cover), total + len(cover)
            cover_pub = [_covers(e, r, "rho0") and _covers(e, r, "rho1")
                         for a, r in zip(anchor, rs, strict=True) for e in a.values()
                         if e["published"]]
            held_pub, total_pub = held_pub + sum(cover_pub), total_pub + len(cover_pub)
            lines.append(f"| {ds} | ({r0}, {r1}) | {' | '.join(a_cells)} | {published} of "
                         f"{len(rs)} | {sum(cover)} / {len(cover)} |")
            nrest = {v: [_at_marks(r[v], marks) for r in rs] for v in variants}
            n_cells = [" / ".join(
                f"{np.mean([_err(n[m], r) for n, r in zip(nrest[v], rs, strict=True)]):.2f}"
                for v in variants) for m in marks]
            nrest_lines.append(f"| {ds} | ({r0}, {r1}) | {' | '.join(n_cells)} |")
    lines += [
        "",
        (f"Over the {total} anchor estimates the intervals held both rates {held} times "
        f"({held / max(total, 1):.1%}); over the {total_pub} published ones {held_pub} times "
        f"({held_pub / max(total_pub, 1):.1%})."),
        *nrest_lines,
    ]
    if len(variants) > 1:
        cpu = {v: np.mean([r["nrest_cpu_seconds"][v] for r in curve["runs"]]) / len(marks)
               for v in variants}
        lines += ["", "CPU per NREst fit: " + ", ".join(
            f"{NREST_NAMES[v]} {cpu[v]:.2f} s" for v in variants) + "."]
    return lines


def replay_part(args: argparse.Namespace) -> dict[str, Any]:
    """Every case of the main table, run by the replay command."""
    seeds = 1 if args.quick else args.seeds
    start = time.process_time()
    cases = [replay_case(ds, alg, rho, args.first_seed, seeds)
             for ds in DATASETS for alg in ALGORITHMS for rho in NOISE]
    return {"machine": machine_info(),
            "seeds": list(range(args.first_seed, args.first_seed + seeds)),
            "cases": cases, "cpu_seconds": time.process_time() - start}


def ablation_part(args: argparse.Namespace) -> list[dict[str, Any]]:
    """linucb_diag given the true rates, with the default uniform share and with 0."""
    seeds = range(args.first_seed, args.first_seed + (1 if args.quick else args.seeds))
    return [run_one(ds, "linucb_diag", rho, seed, args.every, nrest=False, params=params)
            for params in ({}, {"uniform_share": 0.0})
            for ds in DATASETS for rho in NOISE for seed in seeds]


def curve_part(args: argparse.Namespace) -> dict[str, Any]:
    """The error curve: both estimators at :data:`CURVE_MARKS` events."""
    start = time.process_time()
    seeds = range(args.first_seed, args.first_seed + (1 if args.quick else args.curve_seeds))
    runs = [run_one(ds, "linucb_diag", rho, seed, args.every, nrest=True,
                    rounds=CURVE_MARKS[-1], marks=CURVE_MARKS, variants=tuple(NREST_VARIANTS))
            for ds in CURVE_DATASETS for rho in CURVE_NOISE for seed in seeds]
    return {"machine": machine_info(), "marks": list(CURVE_MARKS), "seeds": list(seeds),
            "datasets": list(CURVE_DATASETS), "noise": [list(r) for r in CURVE_NOISE],
            "runs": runs, "cpu_seconds": time.process_time() - start}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2, help="seeds per configuration")
    parser.add_argument("--first-seed", type=int, default=1_000,
                        help="first seed (the defaults were tuned on 0-2 and 100-102)")
    parser.add_argument("--every", type=int, default=2_500, help="events between estimates")
    parser.add_argument("--quick", action="store_true", help="one seed, no NREst baseline")
    parser.add_argument("--part", choices=("replay", "ablation", "curve"), default="replay",
                        help="which runs to make (the other parts' stay in the JSON)")
    parser.add_argument("--curve-seeds", type=int, default=CURVE_SEEDS,
                        help="seeds per setting of the error curve")
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument("--data", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    args = parser.parse_args(argv)
    path = args.data / "noise.json"
    if not args.render_only:
        data = json.loads(path.read_text()) if path.exists() else {}
        if args.part == "replay":
            data["replay"] = replay_part(args)
        elif args.part == "ablation":
            data["runs"] = ablation_part(args)
        else:
            data["curve"] = curve_part(args)
        data["machine"] = machine_info()
        path.write_text(json.dumps(data, indent=1, default=float))
    data = json.loads(path.read_text())
    page = render(data)
    (args.out / "noise.md").write_text(page)
    print(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
