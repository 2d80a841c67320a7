"""Replay runner of the ``noisy_label`` task: UMA / Perceptron under class-conditional label noise.

The noise is a confusion matrix ``C`` (rows = noisy label, columns = true
class): ``--flip-rate r`` flips each label with probability ``r`` to a
uniformly drawn other class (``--flip-to uniform``) or to the next class
(``--flip-to next``: class ``q`` reported as ``q + 1 mod Q``), or
``--confusion-matrix FILE.json`` gives ``C`` (a list of rows, or
``{"matrix": [...], "orientation": "noisy_by_true" | "true_by_noisy"}``).

UMA is given the true ``C``, unless ``--gold-fraction f``: then a
stratified gold set of ``f`` of the data set's rows (the paper's clean set
``S_conf``, at least one row per class) is posted first, each row with a
noisy label and its checked true class, and UMA estimates ``C`` from those
pairs (P4 Section 4.2.1).  The gold rows are not scored.

Each round the learner predicts for ``x_t``, the prediction is scored
against the **true** label (the metric is the online error rate), and the
learner learns from the noisy label.  By default every round draws a fresh
noisy label (``--noise-per round``: a stream of independent noisy
annotations); ``--noise-per example`` corrupts each data set row once (a
fixed noisy data set replayed with repetition).  ``extra`` holds the
confusion matrix in use at the end, its source and its largest error, the
number of gold labels and the error over the last 10% of rounds.

UMA's kernel option goes through ``--params``, e.g. ``--params '{"kernel":
"gaussian:0.25", "n_components": 300}'`` (``--kernel`` belongs to the
``noisy_input`` options of ``noisyloop replay``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from app.learners.confusion import Orientation, validate_confusion
from app.learners.registry import algorithms, build
from app.learners.uma import SELECTIONS, UMA
from app.replay import task_of
from app.replay.result import ReplayResult, chance_error_rate
from app.sim.datasets import load_classification, stream_indices
from app.sim.noisy_labels import (
    circle,
    corrupt_labels,
    gold_mask,
    next_class_confusion,
    uniform_confusion,
)

DEFAULT_ROUNDS = 20_000
DEFAULT_FLIP_RATE = 0.35
CURVE_POINTS = 200
PROGRESS_STEP = 1_000
CIRCLE_CLASSES = 10
CIRCLE_MARGIN = 0.025


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """Options of the noisy-label replay (UMA paper §4)."""
    group.add_argument("--flip-rate", type=float, default=DEFAULT_FLIP_RATE, metavar="R",
                       help=f"probability that a label is replaced (default "
                            f"{DEFAULT_FLIP_RATE}); ignored with --confusion-matrix")
    group.add_argument("--flip-to", choices=("uniform", "next"), default="uniform",
                       help="a flipped label becomes a uniformly drawn other class "
                            "(default) or the next class q+1 mod Q")
    group.add_argument("--confusion-matrix", default=None, metavar="FILE.json",
                       help="noise confusion matrix, rows = noisy label, columns = true class")
    group.add_argument("--gold-fraction", type=float, default=None, metavar="F",
                       help="estimate C from a gold set of this fraction of the rows "
                            "instead of giving UMA the true C")
    group.add_argument("--selection", choices=SELECTIONS, default=None,
                       help="UMA's (p, q) selection (default error)")
    group.add_argument("--noise-per", choices=("round", "example"), default="round",
                       help="draw a fresh noisy label every round (default) or once per row")


def read_confusion(path: str | Path, n_classes: int) -> np.ndarray:
    """Read and validate a confusion matrix from JSON (see the module docstring)."""
    data: Any = json.loads(Path(path).read_text())
    orientation: Orientation = "noisy_by_true"
    if isinstance(data, dict):
        orientation = data.get("orientation", orientation)
        data = data.get("matrix")
    return validate_confusion(data, n_classes, orientation=orientation)


def noise_matrix(args: argparse.Namespace, n_classes: int) -> np.ndarray:
    """The confusion matrix of the simulated noise, from the command line."""
    if args.confusion_matrix:
        return read_confusion(args.confusion_matrix, n_classes)
    if not 0.0 <= args.flip_rate < 1.0:
        raise ValueError(f"--flip-rate must lie in [0, 1), got {args.flip_rate}")
    make = next_class_confusion if args.flip_to == "next" else uniform_confusion
    return make(n_classes, args.flip_rate)


def load_data(name: str, rounds: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``circle`` (the paper's toy problem, ``rounds`` fresh points) or a classification set."""
    if name == "circle":
        X, t, _ = circle(rounds, np.random.default_rng([seed, 2]), CIRCLE_CLASSES, CIRCLE_MARGIN)
        return X, t
    return load_classification(name, n=rounds, seed=seed)


def run(args: argparse.Namespace, seed: int, progress: Callable[[int], None]) -> ReplayResult:
    """Replay ``args.dataset`` through ``args.algorithm`` (default ``uma``) with noisy labels."""
    task = task_of(args, __name__)
    algorithm = getattr(args, "algorithm", None) or algorithms(task)[0]
    rounds = getattr(args, "rounds", None) or DEFAULT_ROUNDS
    X, t = load_data(args.dataset, rounds, seed)
    n_classes = int(t.max()) + 1
    C = noise_matrix(args, n_classes)
    rng = np.random.default_rng([seed, 1])
    fraction = args.gold_fraction
    gold = gold_mask(t, fraction, rng) if fraction else np.zeros(len(t), dtype=bool)
    params: dict[str, Any] = {}
    if algorithm == "uma":
        if args.selection:
            params["selection"] = args.selection
        if not gold.any():
            params["confusion"] = C.tolist()
    params |= dict(getattr(args, "params", None) or {})  # --params on top
    learner = build(task, algorithm, n_features=X.shape[1], n_classes=n_classes,
                    params=params, seed=seed)
    fixed_noisy = corrupt_labels(t, C, rng)
    for i in np.flatnonzero(gold)[rng.permutation(int(gold.sum()))]:
        decision = learner.decide(X[i])
        learner.learn_one({**decision.context, "label": fixed_noisy[i], "gold": 1,
                           "true_label": t[i]})
    order = stream_indices(len(t), rounds, rng)
    per_round = args.noise_per == "round"
    noisy = corrupt_labels(t[order], C, rng) if per_round else fixed_noisy[order]
    err = np.empty(rounds)
    for k, i in enumerate(order):
        decision = learner.decide(X[i])
        err[k] = decision.output["label"] != t[i]
        learner.learn_one({**decision.context, "label": noisy[k], "gold": 0, "true_label": -1})
        done = k + 1
        if done % PROGRESS_STEP == 0 or done == rounds:
            progress(done % PROGRESS_STEP or PROGRESS_STEP)
    running = np.cumsum(err) / np.arange(1, rounds + 1)
    points = np.unique(np.linspace(1, rounds, min(CURVE_POINTS, rounds)).astype(int))
    extra: dict[str, Any] = {
        "noise_confusion": C.tolist(),
        "gold_labels": int(gold.sum()),
        "final_window_error_rate": float(err[-max(1, rounds // 10):].mean()),
        "noisy_label_rate": float(np.mean(noisy != t[order])),
        "noise_per": args.noise_per,
        "chance_error_rate": chance_error_rate(n_classes),
    }
    if isinstance(learner, UMA):
        extra |= {
            "confusion_given": not gold.any(),
            "confusion_used": learner.confusion_.tolist(),
            "confusion_source": learner.confusion_source,
            "confusion_max_error": float(np.abs(learner.confusion_ - C).max()),
            "uma_iterations": int(learner.iterations_),
        }
    return ReplayResult(
        algorithm=algorithm,
        dataset=str(args.dataset),
        rounds=rounds,
        metric="error_rate",
        final=float(running[-1]),
        curve=[(int(p), float(running[p - 1])) for p in points],
        seed=seed,
        params={name: value for name, value in params.items() if name != "confusion"},
        extra=extra,
    )
