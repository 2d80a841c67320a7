"""A configuration's policy learned on the earlier part of a log, for the later part.

:func:`config_policy` builds a learner of a configuration (algorithm and
params, for the log's task and sizes), has it learn the first
``train_fraction`` of the log's events in order, off-policy, as the service's
trainer feeds a model (:func:`learn_logged`: the learner decides for each
batch's contexts with its current state, then learns the batch with the
*logged* play, propensity and click in place of its own), and gives its
``n x K`` matrix on the remaining events (as it explores, or its greedy label
when it offers no distribution; :func:`app.evaluation.policies.learner_policy`).
Only learners that learn from a click on the played label can learn from
logged bandit feedback; others are refused naming that capability.  Pure
numpy, like :mod:`app.learners`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.evaluation.estimators import LabelLog
from app.evaluation.policies import learner_policy
from app.learners.base import Learner, ParamError, stack_events
from app.learners.build import apply_noise_rates, takes_clicks
from app.learners.offpolicy import learn_finite, with_logged_play
from app.learners.registry import build, check_param_types, learner_class

#: Events per learning step (the trainer's default batch).
BATCH = 100
#: The part of a log learned from when the request does not say.
DEFAULT_TRAIN_FRACTION = 0.5


@dataclass(frozen=True)
class ConfigPolicy:
    """A trained configuration's policy on the evaluated events."""

    pi: np.ndarray
    """``n_test x K``: its probability of each label on each evaluated event."""
    train: int
    """Events learned from: the log's first ``train``; the rest are evaluated."""
    log: LabelLog
    """The evaluated events (the rest of the log)."""

    def split(self, stream_ids: Sequence[str] = ()) -> dict[str, Any]:
        """Which events trained and which were evaluated: counts, 0-based rows of the log
        (first and last) and, given the log's event ids, those of the first and last."""
        out: dict[str, Any] = {}
        for name, first, count in (("train", 0, self.train),
                                   ("evaluate", self.train, self.log.n)):
            rows = [first, first + count - 1]
            out[name] = {"events": count, "rows": rows}
            if stream_ids:
                out[name]["stream_ids"] = [stream_ids[rows[0]], stream_ids[rows[1]]]
        return out


def check_config(config: Any, task: str, n_features: int, n_classes: int | None,
                 seed: int | None = None, max_state_bytes: int | None = None) -> Learner:
    """A fresh learner of ``config`` (``{"algorithm", "params"?}``; params over the
    algorithm's service defaults, as for a created model) for a log of ``task``
    (:class:`ParamError` naming ``policy.<field>`` when it is not one, or cannot learn from
    logged bandit feedback, or its state would take more than ``max_state_bytes``)."""
    if not isinstance(config, Mapping) or not isinstance(config.get("algorithm"), str):
        raise ParamError("policy.algorithm", "a configuration is {\"algorithm\": name, "
                         "\"params\": {...}}")
    unknown = sorted(set(config) - {"algorithm", "params"})
    if unknown:
        raise ParamError(f"policy.{unknown[0]}", "a configuration has algorithm and params only")
    algorithm, params = config["algorithm"], config.get("params") or {}
    if not isinstance(params, Mapping):
        raise ParamError("policy.params", "params is an object")
    try:
        cls = learner_class(task, algorithm)
    except ParamError as exc:
        raise ParamError("policy.algorithm", exc.message) from None
    if not takes_clicks(cls):
        raise ParamError("policy.algorithm", f"{algorithm!r} cannot learn from logged bandit "
                         f"feedback: it learns from {', '.join(cls.feedback_fields)}, not from a "
                         "click on the played label (feedback_fields has no 'click')")
    try:
        check_param_types(cls, dict(params))
        params = {**cls.service_defaults, **params}
        if max_state_bytes is not None and \
                cls.state_bytes(n_features, n_classes, params) > max_state_bytes:
            raise ParamError("params", f"{algorithm!r} with these params would keep more than "
                             f"{max_state_bytes // 2**20} MiB of state at these sizes")
        return build(task, algorithm, n_features, n_classes, params, seed=seed)
    except ParamError as exc:
        raise ParamError(f"policy.{exc.field}", exc.message) from None


def learn_logged(learner: Learner, log: LabelLog) -> None:
    """Learn the events of ``log`` in order, in batches of :data:`BATCH`, off-policy (module
    docstring)."""
    for start in range(0, log.n, BATCH):
        rows = slice(start, start + BATCH)
        own = stack_events([d.context for d in learner.decide_many(log.X[rows])])
        learn_finite(learner, with_logged_play(own, {
            "played": log.actions[rows], "prob": log.propensities[rows],
            "click": log.rewards[rows]}))


def split(log: LabelLog, train_fraction: float) -> tuple[LabelLog, LabelLog]:
    """The first ``train_fraction`` of the events and the rest (ValueError when either part
    would be empty)."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), not {train_fraction}")
    train = round(log.n * train_fraction)
    if not 0 < train < log.n:
        raise ValueError(f"{log.n} events cannot be split {train_fraction:g} to train, the "
                         "rest to evaluate")
    return log.rows(slice(0, train)), log.rows(slice(train, log.n))


def config_policy(config: Any, log: LabelLog, train_fraction: float = DEFAULT_TRAIN_FRACTION,
                  rates: tuple[float, float] | None = None, seed: int | None = 0
                  ) -> ConfigPolicy:
    """The policy of ``config`` (a label learner's ``{"algorithm", "params"}``) trained on
    the first ``train_fraction`` of ``log`` at the click-noise ``rates`` (when given), on the
    rest of it (ValueError/ParamError saying why not)."""
    learner = check_config(config, "label", log.X.shape[1], log.n_actions, seed)
    train, test = split(log, train_fraction)
    if rates is not None:
        apply_noise_rates(learner, *rates)
    try:
        learn_logged(learner, train)
    except FloatingPointError as exc:
        raise ValueError(f"learning the log: {exc}") from None
    return ConfigPolicy(learner_policy(test, learner), train.n, test)
