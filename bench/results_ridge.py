"""Ridge bandits beside the papers' learners and Vowpal Wabbit, under click noise.

Every learner sees the same stream (row order from ``stream_indices``) and the
same click noise: for round ``t`` the noisy click is drawn in advance for both
possible true clicks (``noisy_clicks`` on all-ones and all-zeros vectors), so
a learner that plays the right label sees ``right[t]`` and one that plays a
wrong label ``wrong[t]`` (common random numbers).  Reported per run: the
played error (fraction of rounds whose played label is wrong, against the true
label) and the wall-clock microseconds per example of ``decide`` + ``learn``,
measured in this process with the learners run in lockstep, 1,000 rounds
each in turn, so that the load of a shared machine falls on all alike.

Vowpal Wabbit (the ``bench`` extra) runs through its Python binding: the
time includes formatting the example strings, which is part of using VW
from Python.  VW's cost is ``1 - click``; the played action is drawn from
VW's pmf with this script's generator and its probability is logged.

Usage::

    .venv/bin/python bench/results_ridge.py --quick          # 5,000 rounds
    .venv/bin/python bench/results_ridge.py --rounds 100000  # the docs table

Writes ``<data>/ridge.json`` (one record per run) and
``<out>/img/ridge_curves.png`` (running played error on digits at rho
(0.2, 0.4)), and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from app.bench.vw import VWBandit, vw_text
from app.learners.base import Decision, Event, Learner
from app.learners.registry import build
from app.learners.ridge import LinUCBDiag
from app.replay.output import save_figure
from app.replay.result import ReplayResult
from app.sim.datasets import load_classification, stream_indices
from app.sim.feedback import noisy_clicks

DATASETS = ("synsep", "digits", "iris")
NOISE = ((0.0, 0.0), (0.15, 0.15), (0.2, 0.4))


class AdditiveDiagUCB(LinUCBDiag):
    """Ablation: the purely additive diagonal estimator ``sum(click x) / (lambda + sum x^2)``.

    Its statistics add up (a batch would be one scatter-add) but each
    coordinate is fitted on its own; kept here to show why ``linucb_diag``
    uses the residual (RLS) step instead.  ``weights_`` holds ``sum(click x)``.
    """

    def _estimate(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inv = 1.0 / (self.ridge_strength() + self.sum_x2_)
        return (self.weights_ * inv) @ x, np.sqrt(inv @ (x * x))

    def learn_one(self, event: Event) -> None:
        x, played, click = self._check_event(event)
        self.weights_[played] += click * x
        self.sum_x2_[played] += x * x
        self.sum_norm2_ += x @ x
        self.count_ += 1


class VWLearner:
    """:class:`app.bench.vw.VWBandit` behind ``decide`` / ``learn_one``.

    ``adf=True``: ``--cb_explore_adf -q sa`` with a shared context namespace
    ``s`` and one action namespace ``a`` per label; otherwise ``--cb_explore K``.
    The played action is drawn from VW's pmf with one uniform of this
    learner's generator per round.
    """

    def __init__(self, n_classes: int, seed: int, adf: bool) -> None:
        self.vw = VWBandit(n_classes, seed, adf)
        self.rng = np.random.default_rng(seed)

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        text = vw_text(x, self.vw.adf)
        played, prob = self.vw.predict(text, self.rng.random())
        context: dict[str, Any] = {"text": text, "played": played, "prob": prob}
        return Decision({"label": played}, context)

    def learn_one(self, event: Event) -> None:
        self.vw.learn(event["text"], event["played"], 1.0 - event["click"], event["prob"])

    def finish(self) -> None:
        self.vw.finish()


Factory = Callable[[int, int, tuple[float, float], int], "Learner | VWLearner | None"]


def _registry(algorithm: str, **params: Any) -> Factory:
    def make(d: int, k: int, rho: tuple[float, float], seed: int) -> Learner | None:
        if algorithm == "rcnbf":
            if rho == (0.0, 0.0):
                return None  # RCNBF with rho = 0 is Banditron
            params.update(rho0=rho[0], rho1=rho[1])  # known noise rates
        if algorithm == "linucb" and d > 200:
            return None  # refused: O(K d^2)
        return build("label", algorithm, n_features=d, n_classes=k, params=dict(params),
                     seed=seed)
    return make


def _vw(adf: bool) -> Factory:
    def make(d: int, k: int, rho: tuple[float, float], seed: int) -> VWLearner | None:
        try:
            return VWLearner(k, seed, adf)
        except ImportError:
            return None
    return make


LEARNERS: dict[str, Factory] = {
    "banditron": _registry("banditron"),
    "rcnbf": _registry("rcnbf"),
    "linucb_diag": _registry("linucb_diag"),
    "squarecb_diag": _registry("squarecb_diag"),
    "linucb": _registry("linucb"),
    "lints_diag": _registry("lints_diag"),
    "additive_diag_ucb": lambda d, k, rho, seed: AdditiveDiagUCB(n_features=d, n_classes=k),
    "vw_cb_explore_adf": _vw(adf=True),
    "vw_cb_explore": _vw(adf=False),
}


class Run:
    """One learner on one stream: played errors, running curve, time spent learning."""

    def __init__(self, model: Learner | VWLearner, marks: set[int]) -> None:
        self.model, self.marks = model, marks
        self.errors, self.seconds = 0, 0.0
        self.curve: list[tuple[int, float]] = []

    def advance(self, X: np.ndarray, y: np.ndarray, idx: np.ndarray, right: np.ndarray,
                wrong: np.ndarray, start: int, stop: int) -> None:
        """Play rounds ``start .. stop - 1``; only decide + learn are timed."""
        model, errors = self.model, 0
        t0 = time.perf_counter()
        for t in range(start, stop):
            i = idx[t]
            d = model.decide(X[i])
            ok = d.output["label"] == y[i]
            errors += not ok
            model.learn_one({**d.context, "click": right[t] if ok else wrong[t]})
            if t + 1 in self.marks:
                self.curve.append((t + 1, (self.errors + errors) / (t + 1)))
        self.seconds += time.perf_counter() - t0
        self.errors += errors


def run_all(models: dict[str, Learner | VWLearner], X: np.ndarray, y: np.ndarray,
            idx: np.ndarray, right: np.ndarray, wrong: np.ndarray, points: int = 50,
            chunk: int = 1000) -> dict[str, Run]:
    """Run the learners in lockstep, ``chunk`` rounds each in turn.

    Interleaving makes the load of a shared machine fall on every learner
    alike, so the microseconds per example are comparable within a run.
    The curve bookkeeping (one set lookup per round) is inside the timing,
    the same for every learner.
    """
    rounds = len(idx)
    marks = set(np.unique(np.linspace(1, rounds, points).astype(int)).tolist())
    runs = {name: Run(model, marks) for name, model in models.items()}
    for start in range(0, rounds, chunk):
        for run in runs.values():
            run.advance(X, y, idx, right, wrong, start, min(start + chunk, rounds))
    return runs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="5,000 rounds")
    ap.add_argument("--rounds", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--learners", nargs="+", default=list(LEARNERS))
    ap.add_argument("--out", type=Path, default=Path("docs/results"))
    ap.add_argument("--data", type=Path, default=Path("bench/results"),
                    help="directory of ridge[_quick].json, the raw records")
    ap.add_argument("--replot", action="store_true",
                    help="redraw the table and plot from <data>/ridge[_quick].json, run nothing")
    args = ap.parse_args(argv)
    rounds = 5_000 if args.quick else args.rounds
    suffix = "_quick" if args.quick else ""
    if args.replot:
        saved = json.loads((args.data / f"ridge{suffix}.json").read_text())
        done = [ReplayResult(**{**r, "curve": [tuple(p) for p in r["curve"]]}) for r in saved]
        print(markdown_table(done))
        plot(done, args.out / "img" / f"ridge_curves{suffix}.png")
        return
    results: list[ReplayResult] = []
    for name in args.datasets:
        X, y = load_classification(name, n=10_000, seed=args.seed)
        k = int(y.max()) + 1
        idx = stream_indices(len(y), rounds, np.random.default_rng(args.seed + 1))
        for rho in NOISE:
            rng = np.random.default_rng(args.seed + 2)
            right = noisy_clicks(np.ones(rounds), *rho, rng)
            wrong = noisy_clicks(np.zeros(rounds), *rho, rng)
            models = {alg: LEARNERS[alg](X.shape[1], k, rho, args.seed)
                      for alg in args.learners}
            runs = run_all({a: m for a, m in models.items() if m is not None},
                           X, y, idx, right, wrong)
            for alg, run in runs.items():
                if isinstance(run.model, VWLearner):
                    run.model.finish()
                err, us = run.errors / rounds, run.seconds / rounds * 1e6
                results.append(ReplayResult(
                    algorithm=alg, dataset=name, rounds=rounds, metric="played_error",
                    final=err, curve=run.curve, seed=args.seed,
                    extra={"rho0": rho[0], "rho1": rho[1], "us_per_example": us}))
                print(f"{name:7s} rho={rho} {alg:18s} played error {err:.3f}  {us:7.1f} us/ex",
                      flush=True)
    args.data.mkdir(parents=True, exist_ok=True)
    (args.data / f"ridge{suffix}.json").write_text(
        json.dumps([asdict(r) for r in results], indent=1))
    print(markdown_table(results))
    plot(results, args.out / "img" / f"ridge_curves{suffix}.png")


def markdown_table(results: list[ReplayResult]) -> str:
    """Learners as rows; per data set, played error clean / (.15, .15) / (.2, .4) and us/ex."""
    datasets = list(dict.fromkeys(r.dataset for r in results))
    algs = list(dict.fromkeys(r.algorithm for r in results))
    cell = {(r.algorithm, r.dataset, r.extra["rho0"], r.extra["rho1"]): r for r in results}
    head = "| learner | " + " | ".join(
        f"{d} error | {d} us/ex" for d in datasets) + " |"
    lines = [head, "|" + " --- |" * (1 + 2 * len(datasets))]
    for alg in algs:
        row = [alg]
        for d in datasets:
            runs = [cell.get((alg, d, *rho)) for rho in NOISE]
            row.append(" / ".join("—" if r is None else f"{r.final:.3f}" for r in runs))
            us = [r.extra["us_per_example"] for r in runs if r is not None]
            row.append(f"{np.median(us):.0f}" if us else "—")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def plot(results: list[ReplayResult], path: Path) -> None:
    """Running played error on digits at rho (0.2, 0.4), one line per learner."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in results if r.dataset == "digits" and r.extra["rho0"] == 0.2]
    if not runs:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in runs:
        t, e = zip(*r.curve, strict=True)
        ax.plot(t, e, label=r.algorithm)
    ax.set_xlabel("round")
    ax.set_ylabel("running played error")
    ax.set_ylim(0, 1)
    ax.set_title(f"digits, click noise rho0=0.2, rho1=0.4 ({runs[0].rounds} rounds)")
    ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


if __name__ == "__main__":
    main()
