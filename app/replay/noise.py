"""The service's noise estimators in a replay: same estimator, same schedule, same publish rule.

A label replay (:mod:`app.replay.label`) hands every learned batch to a
:class:`NoiseRefresh` built for the run's ``--estimator`` (default: the
service's for the learner, :attr:`~app.learners.config.ModelConfig.default_estimator`):

* ``anchor``: every play is scored by a
  :class:`~app.learners.noise_anchor.ProgressiveScorer` before it is learned,
  as the service's trainer scores it, and every
  :data:`~app.learners.noise_publish.ANCHOR_EVERY` plays the anchor estimate
  runs on the newest :data:`~app.learners.noise_publish.ANCHOR_BUFFER`;
* ``nrest``: NREst on the newest ``n_s`` (the learner's
  :meth:`~app.learners.base.Learner.noise_samples`, else the worker's default
  buffer) plays each time that many new ones arrived;
* ``fixed``: nothing is estimated (the learner keeps the rates it was given).

A rank replay (:mod:`app.replay.rank`) hands every learned batch to a
:class:`SlotRefresh` instead: its learner logs its placements, so, as in the
service's trainer and jobs role, every shown slot is a row
(:meth:`~app.learners.base.Learner.placement_rows`, packed by
:func:`~app.learners.noise_publish.pack_slots`) and the per-slot estimate
(:func:`~app.learners.noise_publish.slot_estimate`) runs on the newest
:data:`~app.learners.noise_publish.SLOT_BUFFER` rows when
:func:`~app.learners.noise_publish.anchor_due` says so: every
:data:`~app.learners.noise_publish.ANCHOR_EVERY` new rows, and once more at the end
of the run on the rows still new (a replay's end counts as the refresh interval
passed).  A published estimate's slot-0 ``rho0``, ``rho1`` and per-slot affine
correction go to the learner (:func:`~app.learners.build.apply_noise_rates`, as the
trainer applies the noise record); until one is, an estimate whose examination
passes its own gate gives the learner the examination-only correction at its
initial rates (:func:`~app.learners.noise_publish.replaces_slots`, as the jobs role
stores it); any other estimate leaves the one in force.

The estimate is published by :mod:`app.learners.noise_publish`, the code the
service's jobs role runs; a published estimate's rates go to the learner for
its later batches, and every estimate, published or not, is reported with its
outcome (status, reason, counts, interval) and the plays seen ``t``.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from app.learners.base import Batch, Learner, ParamError, batch_size
from app.learners.build import apply_noise_rates
from app.learners.config import ModelConfig
from app.learners.noise_anchor import ProgressiveScorer
from app.learners.noise_publish import (
    ANCHOR_BUFFER,
    ANCHOR_EVERY,
    DEFAULT_NREST_BUFFER,
    SLOT_BUFFER,
    anchor_due,
    anchor_estimate,
    nrest_estimate,
    outcome,
    pack_slots,
    replaces_slots,
    slot_estimate,
)
from app.learners.noise_slots import SlotEstimate, click_affine


def estimator_of(args: argparse.Namespace, task: str, algorithm: str,
                 params: dict[str, Any]) -> str:
    """``--estimator``, else the service's default for the learner
    (:attr:`~app.learners.config.ModelConfig.default_estimator`); :class:`ParamError` for
    an estimator that cannot serve it
    (:attr:`~app.learners.config.ModelConfig.usable_estimators`, the service's 422
    ``estimator_unavailable``)."""
    config = ModelConfig.of_learner(task, algorithm, params)
    chosen = getattr(args, "estimator", None) or config.default_estimator
    usable = config.usable_estimators
    if chosen not in usable:
        raise ParamError("--estimator", f"{chosen!r} cannot estimate the noise rates of "
                         f"{algorithm!r}; use one of {list(usable)}")
    return str(chosen)


def keep_newest(columns: dict[str, list[np.ndarray]], keep: int) -> dict[str, np.ndarray]:
    """The newest ``keep`` rows of every column of ``columns`` (lists of arrays, oldest
    first), which from now on hold only those."""
    newest = {k: np.concatenate(v)[-keep:] for k, v in columns.items()}
    columns.update({k: [v] for k, v in newest.items()})
    return newest


class NoiseRefresh:
    """A learner's noise estimator during a replay (module docstring).

    Parameters
    ----------
    learner:
        The replayed learner (it uses noise rates unless ``estimator`` is ``fixed``).
    estimator:
        ``anchor``, ``nrest`` or ``fixed``.
    params:
        The learner's hyper-parameters (``beta_min``, ``percentile``, ``n_s``).
    n_classes:
        Number of labels.
    seed:
        The run's seed (NREst's fits are seeded from it).
    """

    def __init__(self, learner: Learner, estimator: str, params: dict[str, Any],
                 n_classes: int, seed: int) -> None:
        self.learner, self.estimator, self.params, self.seed = learner, estimator, params, seed
        self.n_classes = n_classes
        self.period = (ANCHOR_EVERY if estimator == "anchor" else
                       type(learner).noise_samples(params) or DEFAULT_NREST_BUFFER)
        self.scorer: ProgressiveScorer | None = None
        self.columns: dict[str, list[np.ndarray]] = {}
        self.seen = self.new = 0
        self.estimates: list[dict[str, Any]] = []
        if estimator != "fixed":  # initial rates awaiting an estimate, as in the service
            learner.set_noise_reliability(False)

    @property
    def until_due(self) -> int:
        """Plays still to learn before the next estimate (a batch must not span one)."""
        return self.period - self.new if self.estimator != "fixed" else 1 << 62

    def observe(self, events: list[dict[str, Any]]) -> None:
        """Keep the learned ``events``' plays (scored first for ``anchor``); estimate when
        due."""
        if self.estimator == "fixed" or not events:
            return
        X = np.stack([np.asarray(e["x"], dtype=np.float64) for e in events])
        played = np.array([int(e["played"]) for e in events])
        click = np.array([float(e["click"]) for e in events])
        cols = {"x": X, "played": played, "click": click}
        if self.estimator == "anchor":
            if self.scorer is None:
                self.scorer = ProgressiveScorer(X.shape[1], self.n_classes)
            cols = {"prob": np.array([float(e["prob"]) for e in events]), "click": click,
                    "score": self.scorer.score_and_learn(X, played, click)}
        for name, values in cols.items():
            self.columns.setdefault(name, []).append(values)
        self.seen += len(events)
        self.new += len(events)
        if self.new >= self.period:
            self._estimate()

    def _estimate(self) -> None:
        self.new = 0
        if self.estimator == "anchor":
            c = keep_newest(self.columns, ANCHOR_BUFFER)
            est: Any = anchor_estimate(c["prob"], c["score"], c["click"], self.n_classes,
                                       self.params)
        else:
            # a failed fit publishes nothing: no previous rates
            c = keep_newest(self.columns, self.period)
            est = nrest_estimate(c["x"], c["played"], c["click"], self.n_classes, self.params,
                                 seed=self.seed * 1_000 + len(self.estimates),
                                 previous=(0.0, 0.0))
        out = outcome(est)
        if out["status"] == "published":
            apply_noise_rates(self.learner, out["rho0"], out["rho1"])
        self.estimates.append({"t": self.seen, **out})


class SlotRefresh:
    """A rank learner's per-slot click-noise estimate during a replay (module docstring).

    Parameters
    ----------
    learner:
        The replayed learner (it logs its placements); its initial rates are flagged
        unreliable until an estimate is published, as in the service.
    every:
        Rows between two estimates for an experiment of another schedule; None (default):
        the service's (:func:`~app.learners.noise_publish.anchor_due`).
    """

    def __init__(self, learner: Learner, every: int | None = None) -> None:
        self.learner, self.every = learner, every
        self.columns: dict[str, list[np.ndarray]] = {"prob": [], "score": [], "packed": []}
        self.events = self.new = 0
        self.estimates: list[dict[str, Any]] = []
        self.in_force: SlotEstimate | None = None
        """The last estimate published whole or, until one is, by its examination alone
        (the one the learner uses and a service shows)."""
        self.rates = (float(getattr(learner, "rho0", 0.0)), float(getattr(learner, "rho1", 0.0)))
        """The learner's initial rates (in force until an estimate is published whole)."""
        learner.set_noise_reliability(False)

    def observe(self, batch: Batch) -> None:
        """Keep the shown slots of the learned ``batch``; estimate when due."""
        slot, prob, score, click = type(self.learner).placement_rows(batch)
        for name, values in (("prob", prob), ("score", score),
                             ("packed", pack_slots(slot, click))):
            self.columns[name].append(np.asarray(values, dtype=np.float64))
        self.events += batch_size(batch)
        self.new += int(slot.shape[0])
        if (self.new >= self.every) if self.every else anchor_due(self.new, stale=False):
            self.estimate()

    def finish(self) -> None:
        """The end of the run: estimate the rows still new (the interval has passed)."""
        if anchor_due(self.new, stale=True):
            self.estimate()

    def estimate(self) -> SlotEstimate:
        """Run the per-slot estimate on the newest rows, publish it by the one rule and
        record its outcome with the events seen ``t``."""
        self.new = 0
        cols = keep_newest(self.columns, SLOT_BUFFER)
        est = slot_estimate(cols["prob"], cols["score"], cols["packed"])
        out = outcome(est)
        if replaces_slots(est, self.in_force is not None and self.in_force.published):
            rho0, rho1 = (out["rho0"], out["rho1"]) if est.published else self.rates
            rho0_k = est.rho0 if est.published else np.full(est.theta.shape, rho0)
            alpha, beta = click_affine(est.theta, rho0_k, rho1)
            apply_noise_rates(self.learner, rho0, rho1, reliable=est.published,
                              slot_noise=(tuple(alpha.tolist()), tuple(beta.tolist())))
            self.in_force = est
        self.estimates.append({"t": self.events, **out})
        return est
