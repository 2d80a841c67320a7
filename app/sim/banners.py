"""Three banners for a four-feature user, and a model served in batches as the service does.

The world (:class:`BannerWorld`): a user is ``x = [u1, u2, u3, 1]`` with
``u ~ U(0, 1)``; banner ``a`` is truly clicked with probability
``rates[a] + 0.15 (u1 - 0.5)`` (``rates`` 0.2 / 0.45 / 0.7), the click then
flipped with ``rho0`` (0.1: a click on a banner not truly clicked) and
``rho1`` (0.2: a true click lost).  A change at ``change_at`` moves the rates to
``after`` (by default reversed: the best banner becomes the worst).

:func:`serve_batches` drives a model through that world the way the service
does when a client sends ``batch`` predicts and then their feedback: the
``batch`` decisions are made on one state (the API decides on the published
version), the trainer learns them in one ``learn_many``, the model's drift
detector (:class:`~app.learners.drift.PageHinkley`) takes their observed
clicks in their strata (:meth:`~app.learners.base.Learner.drift_strata`),
and a detection under ``action = "recover"`` replaces the model by one
refitted on the events since the estimated change
(:func:`~app.learners.build.refit`, the step ``workers.recovery`` publishes).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from app.learners.base import Batch
from app.learners.build import MAX_REFIT_EVENTS, build_learner, refit
from app.learners.config import ModelConfig
from app.learners.drift import PageHinkley
from app.sim.feedback import noisy_clicks

#: True click rates of the three banners at ``u1 = 0.5``.
RATES = (0.2, 0.45, 0.7)
#: How much ``u1`` moves every rate: ``slope * (u1 - 0.5)``.
SLOPE = 0.15


@dataclass(frozen=True)
class BannerWorld:
    """The world of the module docstring; ``change_at`` None: stationary."""

    rho0: float = 0.1
    rho1: float = 0.2
    rates: tuple[float, ...] = RATES
    change_at: int | None = None
    after: tuple[float, ...] = tuple(reversed(RATES))

    def users(self, start: int, n: int, rng: np.random.Generator
              ) -> tuple[np.ndarray, np.ndarray]:
        """Users ``start .. start + n - 1``: their features ``(n, 4)`` and the true click
        probability of every banner for each ``(n, 3)``."""
        u = rng.random((n, 3))
        t = start + np.arange(n)
        base = np.broadcast_to(np.asarray(self.rates), (n, len(self.rates)))
        if self.change_at is not None:
            base = np.where((t >= self.change_at)[:, None], np.asarray(self.after), base)
        return np.c_[u, np.ones(n)], np.clip(base + SLOPE * (u[:, :1] - 0.5), 0.0, 1.0)

    def clicks(self, truth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Observed clicks of plays whose true click probabilities are ``truth``."""
        true_click = (rng.random(truth.shape[0]) < truth).astype(np.float64)
        return noisy_clicks(true_click, self.rho0, self.rho1, rng)


@dataclass
class Served:
    """What :func:`serve_batches` saw."""

    detections: list[int] = field(default_factory=list)
    """Events (1-based) at which the detector raised an alarm."""
    since: list[int] = field(default_factory=list)
    """For each alarm, the events from the estimated change (what the recovery relearned)."""
    reward: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """True click probability of each played banner."""
    best: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """Whether each play was the truly best banner."""


def serve_batches(config: ModelConfig, world: BannerWorld, events: int, batch: int,
                  seed: int, action: str = "recover", strata: bool = True) -> Served:
    """Serve ``events`` users to the model of ``config`` in batches of ``batch`` (module
    docstring); ``action`` ``recover`` refits on a detection, ``alert`` only counts it;
    ``strata=False`` gives the detector every event in one stratum (the plain test)."""
    rng = np.random.default_rng(seed)
    learner = build_learner(config)
    rates = (world.rho0, world.rho1)
    learner.set_noise_rates(*rates)
    detector = PageHinkley()
    out = Served(reward=np.zeros(events), best=np.zeros(events, dtype=bool))
    history: deque[Batch] = deque()
    held = t = 0
    while t < events:
        n = min(batch, events - t)
        X, truth = world.users(t, n, rng)
        decisions = learner.decide_many(X)
        played = np.array([int(d.context["played"]) for d in decisions])
        rows = np.arange(n)
        out.reward[t:t + n] = truth[rows, played]
        out.best[t:t + n] = played == truth.argmax(axis=1)
        applied: Batch = {
            "x": X, "played": played, "click": world.clicks(truth[rows, played], rng),
            "greedy": np.array([int(d.context["greedy"]) for d in decisions]),
            "prob": np.array([float(d.context["prob"]) for d in decisions]),
        }
        learner.learn_many(applied)
        history.append(applied)
        held += n
        while held - history[0]["click"].shape[0] >= MAX_REFIT_EVENTS:
            held -= history.popleft()["click"].shape[0]  # a recovery reads no further back
        t += n
        found = detector.update(learner.observed_clicks(applied),
                                learner.drift_strata(applied) if strata else None)
        out.detections += found.detected_at  # the detector counts every event
        out.since += found.since
        if found.detected_at and action == "recover":
            relearn = _newest(history, min(found.since[-1], MAX_REFIT_EVENTS))
            learner = refit(config, relearn, rates)
            history, held = deque([relearn]), relearn["click"].shape[0]
    return out


def _newest(history: deque[Batch], events: int) -> Batch:
    """The newest ``events`` events of ``history`` as one batch, in order."""
    return {k: np.concatenate([b[k] for b in history])[-events:] for k in history[-1]}
