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
:class:`~app.learners.slot_refresh.SlotRefresh` instead (the per-slot estimate on
the learner's logged placements, by the service's schedule).

The estimate is published by :mod:`app.learners.noise_publish`, the code the
service's jobs role runs; a published estimate's rates go to the learner for
its later batches, an estimate that withdraws it
(:func:`~app.learners.noise_publish.withdraws`) leaves the learner those rates
flagged unreliable, as the service does, and every estimate, published or not, is
reported with its outcome (status, reason, counts, interval) and the plays seen ``t``.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from app.learners.base import Learner, ParamError
from app.learners.build import apply_noise_rates
from app.learners.config import ModelConfig
from app.learners.noise_anchor import ProgressiveScorer
from app.learners.noise_publish import (
    ANCHOR_BUFFER,
    ANCHOR_EVERY,
    DEFAULT_NREST_BUFFER,
    anchor_estimate,
    nrest_estimate,
    outcome,
    withdraws,
)
from app.learners.slot_refresh import keep_newest


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
    one_right_label:
        Whether every input is stated to have exactly one right label (the anchor
        estimate's assumption: unstated, it is never published).
    """

    def __init__(self, learner: Learner, estimator: str, params: dict[str, Any],
                 n_classes: int, seed: int, *, one_right_label: bool) -> None:
        self.learner, self.estimator, self.params, self.seed = learner, estimator, params, seed
        self.one_right_label = one_right_label
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
                                       self.params, one_right_label=self.one_right_label)
        else:
            # a failed fit publishes nothing: no previous rates
            c = keep_newest(self.columns, self.period)
            est = nrest_estimate(c["x"], c["played"], c["click"], self.n_classes, self.params,
                                 seed=self.seed * 1_000 + len(self.estimates),
                                 previous=(0.0, 0.0))
        out = outcome(est)
        if out["status"] == "published":
            apply_noise_rates(self.learner, out["rho0"], out["rho1"])
        elif withdraws(out):  # the rates stay, flagged (as in the service)
            self.learner.set_noise_reliability(False)
        self.estimates.append({"t": self.seen, **out})
