"""Replay runner of the ``label`` and ``label_set`` tasks (P1 and P2).

One module serves both tasks (the command maps ``label_set`` to it): the
loop is the same, only the feedback differs.  Each round the learner decides
for ``x_t`` and the greedy prediction (``greedy_label``, or the first of
``greedy_labels``) is scored against the true label -- the online error rate
the papers plot.  The learner then learns from

* ``click``: the true bandit bit ``I[played = y]`` (``label``) or
  ``I[y in played set]`` (``label_set``, P2's dilute feedback), flipped with
  ``--rho0`` / ``--rho1`` (P1 Section 3);
* ``label``: the true label, for the full-information learners (Perceptron,
  MC-SLP), which ignore the click noise.

Learners that use noise rates (``uses_noise_rates``: rcnbf, rcine, soba, the
ridge bandits) estimate them as the service does, with ``--estimator``
(default: the service's default for the learner, ``anchor`` for all of these):
they start from their ``rho0``/``rho1`` params (default 0) and a
:class:`~app.replay.noise.NoiseRefresh` runs the estimator on the learned
plays and hands each published estimate to the learner, by the service's
schedule and publish rule.  The datasets are classes, one of them right for each
input, so the replay states one right label per input, the anchor estimate's
assumption, as a model's owner does with ``PUT .../noise``
(``--no-one-right-label`` denies it: no estimate is then published, as for a ridge
bandit's model nobody stated it for).  ``--estimator nrest`` is the papers' NREst (for
``rcine``, P1 Algorithm 2: every ``--n-s`` feedback events);
``--estimator fixed`` gives the learner the true ``--rho0``/``--rho1`` (the
rates a service is given with ``PUT .../noise``).  ``extra["noise_estimates"]``
lists every estimate with its outcome and interval.

With ``--feedback-delay B`` (default 1, the papers' fully online protocol)
the learner decides ``B`` rounds with the same weights and then learns
them with one ``learn_many`` call, as the service's trainer applies a batch of
delayed feedback; a batch never spans a noise estimate.

``extra`` also holds the cumulative error of the *played* label (or the
rate of played sets that miss the true label), the observed noisy click rate
and the error over the last 10% of rounds.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.learners.base import Learner, ParamError, stack_events
from app.learners.config import takes_clicks
from app.learners.proxy import check_noise_rates
from app.learners.registry import algorithms, build, default_params, learner_class
from app.replay import task_of
from app.replay.drift import drift_report, schedule
from app.replay.noise import NoiseRefresh, estimator_of
from app.replay.result import ReplayResult, chance_error_rate
from app.sim.datasets import load_classification, stream_indices
from app.sim.drift import drifted_labels
from app.sim.feedback import noisy_clicks, set_contains

DEFAULT_ROUNDS = 10_000
CURVE_POINTS = 200
PROGRESS_STEP = 1_000


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """Options of the bandit replays (noisy bandit feedback P1, dilute feedback P2)."""
    group.add_argument("--rho0", type=float, default=0.0, metavar="R0",
                       help="click noise P(click=1 | wrong) (default 0)")
    group.add_argument("--rho1", type=float, default=0.0, metavar="R1",
                       help="click noise P(click=0 | right) (default 0)")
    group.add_argument("--gamma", type=float, default=None, metavar="G",
                       help="exploration rate (default: the learner's)")
    group.add_argument("--m", type=int, default=None, metavar="M",
                       help="label-set size of label_set learners (default: the learner's)")
    group.add_argument("--estimator", choices=("anchor", "nrest", "fixed"), default=None,
                       help="noise-rate estimator of learners that use the rates, as in the "
                            "service (default: the service's, anchor); fixed: the learner "
                            "is given the true --rho0/--rho1 (rank: anchor, the per-slot "
                            "estimate, or fixed: the --click-noise rates)")
    group.add_argument("--one-right-label", action=argparse.BooleanOptionalAction,
                       default=True,
                       help="state that every input has exactly one right label, the anchor "
                            "estimate's assumption, as a model's owner does with PUT "
                            ".../noise (default: stated, as the datasets are classes; "
                            "--no-one-right-label denies it, and no estimate is published)")
    group.add_argument("--n-s", type=int, default=None, metavar="N",
                       help="rcine: NREst period in feedback events (default 5000)")
    group.add_argument("--nrest-percentile", type=float, default=None, metavar="P",
                       help="rcine: NREst perfect-example percentile "
                            "(default 100 (1 - 1/(2K)))")
    group.add_argument("--feedback-delay", type=int, default=1, metavar="B",
                       help="learn in batches of B rounds decided with the same weights "
                            "(delayed feedback, learn_many); default 1 = fully online")


def learner_params(args: argparse.Namespace, task: str, algorithm: str) -> dict[str, Any]:
    """Hyper-parameters from the command line, then ``--params`` on top; with the
    ``fixed`` estimator (:func:`estimator_of`) a learner that uses noise rates is given the
    true ``--rho0``/``--rho1``.

    An option the learner does not take (``--gamma`` for the Perceptron,
    ``--n-s`` for rcnbf, ...) is refused with a :class:`ParamError` naming
    it, so a typo'd experiment cannot silently run with defaults.
    """
    cls = learner_class(task, algorithm)
    known = default_params(cls)
    given = {"gamma": args.gamma, "m": args.m, "n_s": args.n_s,
             "percentile": args.nrest_percentile}
    flags = {"gamma": "--gamma", "m": "--m", "n_s": "--n-s",
             "percentile": "--nrest-percentile"}
    params: dict[str, Any] = {}
    for name, value in given.items():
        if value is None:
            continue
        if name not in known:
            raise ParamError(flags[name], f"does not apply to {algorithm!r} (task {task})")
        params[name] = value
    params |= dict(getattr(args, "params", None) or {})
    if cls.uses_noise_rates and estimator_of(args, task, algorithm, params) == "fixed":
        params = {"rho0": args.rho0, "rho1": args.rho1} | params
    return params


def click_source(rounds: int, rho0: float, rho1: float, seed: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Noisy clicks for a true click of 0 and of 1, one pair per round.

    Both come from :func:`noisy_clicks` with generators of the same seed, so
    round ``t`` uses one uniform draw whatever the true click turns out to
    be: the noise is fixed before the run and vectorised.
    """
    if_wrong = noisy_clicks(np.zeros(rounds), rho0, rho1, np.random.default_rng([seed, 2]))
    if_right = noisy_clicks(np.ones(rounds), rho0, rho1, np.random.default_rng([seed, 2]))
    return if_wrong, if_right


def greedy_label(output: dict[str, Any]) -> int:
    """The greedy label of a decision's output (the first greedy label of a set)."""
    return int(output["greedy_labels"][0] if "greedy_labels" in output
               else output["greedy_label"])


@dataclass(frozen=True)
class Setup:
    """What a label / label_set replay run needs before its first round."""

    task: str
    algorithm: str
    params: dict[str, Any]
    estimator: str
    one_right_label: bool
    """Whether one right label per input is stated (``--one-right-label``: the datasets are
    classes, one of them right)."""
    X: np.ndarray
    y: np.ndarray
    order: np.ndarray
    if_wrong: np.ndarray
    if_right: np.ndarray
    labels: np.ndarray
    """The true label of each round: ``y[order]``, moved to a second world by ``--drift``."""

    @property
    def n_classes(self) -> int:
        return int(self.y.max()) + 1


def setup(args: argparse.Namespace, seed: int) -> Setup:
    """Task, algorithm, hyper-parameters, data, round order and pre-drawn clicks of one run.

    Shared by the in-process loop and the replay through a service
    (:mod:`app.replay.service`), so both replay the same stream.
    """
    task = task_of(args, __name__)
    algorithm = getattr(args, "algorithm", None) or algorithms(task)[0]
    rounds = getattr(args, "rounds", None) or DEFAULT_ROUNDS
    delay = int(args.feedback_delay)
    if delay < 1:
        raise ParamError("--feedback-delay", f"must be >= 1, got {delay}")
    X, y = load_classification(args.dataset, n=rounds, seed=seed,
                               normalise=not getattr(args, "no_normalise", False))
    check_noise_rates(args.rho0, args.rho1)
    params = learner_params(args, task, algorithm)
    estimator = estimator_of(args, task, algorithm, params)
    one_right = bool(getattr(args, "one_right_label", True))
    order = stream_indices(len(y), rounds, np.random.default_rng([seed, 1]))
    if_wrong, if_right = click_source(rounds, args.rho0, args.rho1, seed)
    labels = drifted_labels(y[order], schedule(args), int(y.max()) + 1,
                            np.random.default_rng([seed, 3]))
    return Setup(task, algorithm, params, estimator, one_right, X, y, order, if_wrong,
                 if_right, labels)


Observer = Callable[[list[dict[str, Any]]], None]
"""Called with each batch of joined events (logged context and feedback) once learned."""


def run(args: argparse.Namespace, seed: int, progress: Callable[[int], None],
        observe: Observer | None = None) -> ReplayResult:
    """Replay ``args.dataset`` through ``args.algorithm`` (default: the task's first).

    ``observe``, if given, sees every learned batch of events in stream order
    (e.g. to estimate the noise rates from the logged plays as they arrive).
    """
    s = setup(args, seed)
    learner = build(s.task, s.algorithm, n_features=s.X.shape[1], n_classes=s.n_classes,
                    params=s.params, seed=seed)
    refresh = (NoiseRefresh(learner, s.estimator, s.params, s.n_classes, seed,
                            one_right_label=s.one_right_label)
               if s.estimator != "fixed" else None)
    loop = _Loop(learner, s.X, s.labels, s.order, s.if_wrong, s.if_right, progress, refresh,
                 observe)
    loop.run(int(args.feedback_delay))
    return result(args, s.task, s.algorithm, seed, s.params, loop.greedy_err, loop.played_err,
                  loop.clicks, refresh.estimates if refresh is not None else None,
                  n_classes=s.n_classes, estimator=s.estimator, strata=loop.strata)


def result(args: argparse.Namespace, task: str, algorithm: str, seed: int,
           params: dict[str, Any], greedy_err: np.ndarray, played_err: np.ndarray,
           clicks: np.ndarray, estimates: list[dict[str, Any]] | None, *,
           n_classes: int, estimator: str, strata: np.ndarray | None = None) -> ReplayResult:
    """The run's learning curve and summary from its per-round errors and clicks (``strata``:
    the drift detector's stratum of each round; None: one).

    Shared by the in-process loop and the replay through a service
    (:mod:`app.replay.service`), so both write the same fields.
    """
    rounds = len(greedy_err)
    running = np.cumsum(greedy_err) / np.arange(1, rounds + 1)
    # log-spaced points: the curves are read on log-log axes, like the papers'
    spaced = np.geomspace(1, rounds, min(CURVE_POINTS, rounds)).astype(int)
    points = np.unique(np.append(spaced, rounds))
    extra: dict[str, Any] = {
        "task": task,
        "rho0": args.rho0,
        "rho1": args.rho1,
        "played_error_rate": float(played_err.mean()),
        "noisy_click_rate": float(clicks.mean()),
        "final_window_error_rate": float(greedy_err[-max(1, rounds // 10):].mean()),
        "feedback_delay": int(args.feedback_delay),
        "chance_error_rate": chance_error_rate(n_classes),
        "estimator": estimator,
    }
    if estimates is not None:
        extra["noise_estimates"] = estimates
    drift = schedule(args)
    if drift.kind != "none":
        reward = 1.0 - played_err
        extra |= drift_report(drift, reward, np.ones(rounds), np.full(rounds, 1.0 / n_classes),
                              clicks, strata)
    return ReplayResult(
        algorithm=algorithm, dataset=str(args.dataset), rounds=rounds, metric="error_rate",
        final=float(running[-1]),
        curve=[(int(p), float(running[p - 1])) for p in points],
        seed=seed, params=params, extra=extra,
    )


class _Loop:
    """The replay loop's state: one learner, the stream, the simulated feedback."""

    def __init__(self, learner: Learner, X: np.ndarray, labels: np.ndarray, order: np.ndarray,
                 if_wrong: np.ndarray, if_right: np.ndarray,
                 progress: Callable[[int], None], refresh: NoiseRefresh | None,
                 observe: Observer | None = None) -> None:
        self.learner, self.X, self.labels, self.order = learner, X, labels, order
        self.refresh, self.observe = refresh, observe
        self.if_wrong, self.if_right = if_wrong, if_right
        self.progress = progress
        rounds = len(order)
        self.greedy_err = np.zeros(rounds)
        self.played_err = np.zeros(rounds)
        self.clicks = np.zeros(rounds)
        self.strata = np.zeros(rounds, dtype=np.intp)
        self.full_info = not takes_clicks(learner)
        self.reported = 0

    def run(self, delay: int) -> None:
        rounds = len(self.order)
        t = 0
        while t < rounds:
            stop = min(t + delay, rounds)
            if self.refresh is not None:  # a batch must not span a noise estimate
                stop = min(stop, t + self.refresh.until_due)
            events = [self._round(k) for k in range(t, stop)]
            batch = stack_events(events)
            if len(events) == 1:
                self.learner.learn_one(events[0])
            else:
                self.learner.learn_many(batch)
            if not self.full_info:
                self.strata[t:stop] = self.learner.drift_strata(batch)
            if self.refresh is not None:
                self.refresh.observe(events)
            if self.observe is not None:
                self.observe(events)
            t = stop
            if t - self.reported >= PROGRESS_STEP or t == rounds:
                self.progress(t - self.reported)
                self.reported = t

    def _round(self, k: int) -> dict[str, Any]:
        """Decide round ``k``, score it, simulate its feedback; return the joined event."""
        i = self.order[k]
        label = int(self.labels[k])
        decision = self.learner.decide(self.X[i])
        ctx = decision.context
        self.greedy_err[k] = greedy_label(decision.output) != label
        right = bool(set_contains(ctx["played"], np.asarray(label)))
        self.played_err[k] = not right
        click = self.if_right[k] if right else self.if_wrong[k]
        self.clicks[k] = click
        if self.full_info:
            return {**ctx, "label": label}
        return {**ctx, "click": click}
