"""A configuration's policy learned on the earlier part of a log, for the later part.

:func:`config_policy` builds a learner of a configuration (algorithm and
params, for the log's task and sizes), has it learn the first
``train_fraction`` of the log's events in order, off-policy, as the service's
trainer feeds a model (:func:`learn_logged`: the learner decides for each
batch's contexts with its current state, then learns the batch with the
*logged* play, propensity and click in place of its own), and gives its
``n x K`` matrix on the remaining events (as it explores, or its greedy label
when it offers no distribution; :func:`app.evaluation.policies.learner_policy`).
A log read in chunks is learned by :class:`Training`, which keeps the steps
of :data:`BATCH` events counted from the log's first event whatever the
chunks, so the learner ends as it would on the log in memory.  Only learners
that learn from a click on the played label can learn from logged bandit
feedback; others are refused naming that capability.  Pure
numpy, like :mod:`app.learners`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol, TypeVar

import numpy as np

from app.evaluation.estimators import LabelLog
from app.evaluation.policies import learner_policy
from app.learners.base import Learner, ParamError
from app.learners.build import apply_noise_rates
from app.learners.offpolicy import learn_finite, with_logged_play
from app.learners.registry import build, check_param_types, default_params, learner_class

#: Events per learning step (the trainer's default batch).
BATCH = 100
#: The part of a log learned from when the request does not say.
DEFAULT_TRAIN_FRACTION = 0.5
#: The feedback a label log holds of each play.
LABEL_FEEDBACK = ("click",)


class LoggedPlays(Protocol):
    """A log (a dataclass of per-event columns) a learner can learn off-policy."""

    @property
    def X(self) -> np.ndarray:
        """``n x d`` contexts."""
        ...

    @property
    def n(self) -> int: ...

    def rows(self, rows: slice) -> Any: ...

    def logged_play(self) -> dict[str, np.ndarray]:
        """Each event's logged play and feedback, under the names learners read them
        (:func:`app.learners.offpolicy.with_logged_play`)."""
        ...


L = TypeVar("L", bound=LoggedPlays)


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
        """:func:`split_fields` of this split, given the log's event ids (or none)."""
        ends = (0, self.train - 1, self.train, self.train + self.log.n - 1)
        return split_fields(self.train, self.log.n,
                            [stream_ids[i] for i in ends] if stream_ids else ())


def split_fields(train: int, evaluated: int, stream_ids: Sequence[str] = ()
                 ) -> dict[str, Any]:
    """Which events trained and which were evaluated: counts, 0-based rows of the log
    (first and last) and, given the ids of the first and last event of each part (four),
    those."""
    out: dict[str, Any] = {}
    for k, (name, first, count) in enumerate((("train", 0, train),
                                              ("evaluate", train, evaluated))):
        out[name] = {"events": count, "rows": [first, first + count - 1]}
        if stream_ids:
            out[name]["stream_ids"] = list(stream_ids[2 * k:2 * k + 2])
    return out


def check_config(config: Any, task: str, n_features: int, n_classes: int | None,
                 seed: int | None = None, max_state_bytes: int | None = None, *,
                 feedback: Sequence[str] = LABEL_FEEDBACK,
                 inherited: Mapping[str, Any] | None = None) -> Learner:
    """A fresh learner of ``config`` (``{"algorithm", "params"?}``; params over the
    algorithm's service defaults and the evaluated model's ``inherited`` params, as for a
    created model) for a log of ``task`` holding the ``feedback`` fields of each play
    (:class:`ParamError` naming ``policy.<field>`` when it is not one, or cannot learn from
    that feedback, or sets an inherited param to another value, or its state would take
    more than ``max_state_bytes``)."""
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
    if not set(cls.feedback_fields) <= set(feedback):
        raise ParamError("policy.algorithm", f"{algorithm!r} cannot learn from logged bandit "
                         f"feedback: it learns from {', '.join(cls.feedback_fields)}, the log "
                         f"holds {', '.join(feedback)} of each play (feedback_fields)")
    for name, value in (inherited or {}).items():
        if name in params and params[name] != value:
            raise ParamError(f"policy.params.{name}", f"a configuration is evaluated with the "
                             f"model's {name}, {value!r}")
    try:
        check_param_types(cls, dict(params))
        params = {**default_params(cls), **cls.service_defaults, **params, **(inherited or {})}
        if max_state_bytes is not None and \
                cls.state_bytes(n_features, n_classes, params) > max_state_bytes:
            raise ParamError("params", f"{algorithm!r} with these params would keep more than "
                             f"{max_state_bytes // 2**20} MiB of state at these sizes")
        return build(task, algorithm, n_features, n_classes, params, seed=seed)
    except ParamError as exc:
        raise ParamError(f"policy.{exc.field}", exc.message) from None


def learn_logged(learner: Learner, log: LoggedPlays) -> None:
    """Learn the events of ``log`` in order, in batches of :data:`BATCH`, off-policy (module
    docstring; ValueError when an update overflows)."""
    for start in range(0, log.n, BATCH):
        batch = log.rows(slice(start, start + BATCH))
        own = learner.decide_contexts(batch.X)
        try:
            learn_finite(learner, with_logged_play(own, batch.logged_play()))
        except FloatingPointError as exc:
            raise ValueError(f"learning the log: {exc}") from None


@dataclass
class Training:
    """A learner learning a log that arrives in chunks of any size, in the steps of
    :data:`BATCH` events :func:`learn_logged` takes on the whole log (the events of an
    unfinished step wait in ``pending`` for the next chunk or :meth:`finish`)."""

    learner: Learner
    pending: Any = None

    def learn(self, log: LoggedPlays) -> None:
        """Learn the events of ``log``, which follow those given before."""
        if self.pending is not None:
            log = concatenated(self.pending, log)
        steps = log.n - log.n % BATCH
        if steps:
            learn_logged(self.learner, log.rows(slice(steps)))
        self.pending = log.rows(slice(steps, None)) if steps < log.n else None

    def finish(self) -> Learner:
        """The learner once it learned the events still pending too."""
        if self.pending is not None:
            learn_logged(self.learner, self.pending)
            self.pending = None
        return self.learner


def concatenated(first: L, then: L) -> L:
    """The events of ``first`` followed by those of ``then`` (a dataclass of columns: its
    arrays joined, a column only one holds dropped, its other fields ``first``'s)."""
    joined: dict[str, Any] = {}
    for column in fields(first):  # type: ignore[arg-type]
        a, b = getattr(first, column.name), getattr(then, column.name)
        arrays = isinstance(a, np.ndarray), isinstance(b, np.ndarray)
        joined[column.name] = (np.concatenate([a, b]) if all(arrays)
                               else None if any(arrays) else a)
    return type(first)(**joined)


def start_training(config: Any, task: str, n_features: int, n_classes: int | None,
                   rates: tuple[float, float] | None = None, seed: int | None = 0, *,
                   feedback: Sequence[str] = LABEL_FEEDBACK,
                   inherited: Mapping[str, Any] | None = None) -> Training:
    """A fresh learner of ``config`` (:func:`check_config`, a learner of ``task`` for a log
    holding ``feedback``, with the model's ``inherited`` params) at the click-noise
    ``rates`` (when given), ready to learn that log."""
    learner = check_config(config, task, n_features, n_classes, seed, feedback=feedback,
                           inherited=inherited)
    if rates is not None:
        apply_noise_rates(learner, *rates)
    return Training(learner)


def train_size(n: int, train_fraction: float) -> int:
    """How many of ``n`` events the first ``train_fraction`` holds (ValueError when it or
    the rest would be empty)."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), not {train_fraction}")
    train = round(n * train_fraction)
    if not 0 < train < n:
        raise ValueError(f"{n} events cannot be split {train_fraction:g} to train, the "
                         "rest to evaluate")
    return train


def split(log: LabelLog, train_fraction: float) -> tuple[LabelLog, LabelLog]:
    """The first ``train_fraction`` of the events and the rest (ValueError when either part
    would be empty)."""
    train = train_size(log.n, train_fraction)
    return log.rows(slice(0, train)), log.rows(slice(train, log.n))


def config_policy(config: Any, task: str, log: LabelLog,
                  train_fraction: float = DEFAULT_TRAIN_FRACTION,
                  rates: tuple[float, float] | None = None, seed: int | None = 0
                  ) -> ConfigPolicy:
    """The policy of ``config`` (the ``{"algorithm", "params"}`` of a learner of ``task``)
    trained on the first ``train_fraction`` of ``log`` at the click-noise ``rates`` (when
    given), on the rest of it (ValueError/ParamError saying why not)."""
    training = start_training(config, task, log.X.shape[1], log.n_actions, rates, seed)
    train, test = split(log, train_fraction)
    training.learn(train)
    return ConfigPolicy(learner_policy(test, training.finish()), train.n, test)
