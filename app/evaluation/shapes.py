"""Log shapes: how a task's decision log is evaluated off-policy, declared by the task.

A :class:`LogShape` says how a batch of a log's lines is read into the columns its
estimators take, which policies it is evaluated for and as what function of a batch, what
its evaluation sums (its :class:`~app.evaluation.sums.Kind`), which click-noise rates
correct its rewards, and how the summed log becomes the result (with, where the estimators
ask for it, a third pass that gathers per-event columns).  A task declares its shape
(:attr:`app.tasks.base.Task.log_shape`); the worker's queued evaluations
(:mod:`workers.evaluations`) stream any shape through these methods and name none, so a
task of a new shape adds its shape beside its task, and nothing here or in the workers.

The two shapes of the project: :data:`LABEL_SHAPE` (one played label per line, the
estimators of :mod:`app.evaluation.estimators`) and :data:`RANK_SHAPE` (a ranking per
line, :mod:`app.evaluation.rankings`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, Protocol

import numpy as np

from app.evaluation.estimators import LABEL, LabelLog, LabelSums, Options
from app.evaluation.heavy_tails import MIN_ESS, guard_heavy_tails, label_columns
from app.evaluation.policies import (
    fixed_policy,
    learner_policy,
    logging_policy,
    uniform_policy,
)
from app.evaluation.rankings import (
    RANK,
    RANK_POLICIES,
    RankLog,
    RankSums,
    joined_columns,
    rank_policy,
    slot_columns,
)
from app.evaluation.servicelog import ServiceLog, keyed_batch, label_log_of, rank_log_of
from app.evaluation.streaming import Batch, Policy
from app.evaluation.sums import Kind
from app.evaluation.training import LABEL_FEEDBACK
from app.learners.base import Learner
from app.learners.build import build_learner
from app.learners.config import ModelConfig

#: Which click-noise rates a shape's rewards are corrected by: one pair ``rho0, rho1``
#: (``"click"``), a per-slot estimate (``"slots"``), or none (None).
Noise = Literal["click", "slots"] | None


class LogShape(Protocol):
    """How a log of one shape is evaluated (module docstring)."""

    policies: tuple[str, ...]
    """The kinds of policy (:func:`app.evaluation.policies.policy_kind`) it is evaluated
    for."""
    noise: Noise
    kind: Kind
    command: str | None
    """The module that evaluates an exported log of this shape for ``noisyloop evaluate``
    (its ``run_export(args, policy)`` reads the file, evaluates it and returns the result
    JSON), named, not imported (evaluation knows nothing of the command line); None when
    the command does not evaluate this shape's logs."""

    def reads(self, line: Mapping[str, Any]) -> bool:
        """Whether ``line``, an event line of an exported log, is one of this shape's (how
        ``noisyloop evaluate`` finds the shape of a log whose task it is not told:
        :func:`app.tasks.log_shape_of`)."""
        ...

    def batch(self, records: list[Any], first_line: int, config: ModelConfig,
              path: str) -> Batch | None:
        """The events of ``records`` (consecutive lines of a log from its line
        ``first_line``) as columns with their keys; None when they hold no event."""
        ...

    def reads_snapshot(self, policy: Any) -> bool:
        """Whether ``policy`` is the model's own (its snapshot's state is then read)."""
        ...

    def policy(self, policy: Any, config: ModelConfig,
               state: Mapping[str, np.ndarray] | None) -> Policy:
        """A queued evaluation's ``policy`` as a function of a batch (picklable);
        ``state`` is the model's snapshot for the policies that read it."""
        ...

    def third_pass(self, sums: Any) -> Any:
        """What a third pass over the log gathers for the result, or None for none."""
        ...

    def gather(self, batches: Iterable[tuple[Any, np.ndarray | None]], need: Any) -> Any:
        """The columns ``need`` asks for, of batches with the target policy's matrix."""
        ...

    def join(self, parts: list[Any], need: Any) -> Any:
        """The gathered columns of the log's chunks, in order, as one."""
        ...

    def result(self, sums: Any, options: Options, gathered: Any) -> dict[str, Any]:
        """The result JSON of the summed log (``gathered``: the third pass's, or None)."""
        ...


class ConfigShape(LogShape, Protocol):
    """A log shape whose policies take a ``configuration`` (a new learner trained on the
    log's earlier events, evaluated on the rest: :mod:`app.evaluation.configrun`): what the
    training and the scoring of a configuration need of the log."""

    feedback: tuple[str, ...]
    """The feedback fields each logged play holds (a configuration's learner must learn from
    these only: :func:`app.evaluation.training.check_config`)."""

    def inherited(self, config: ModelConfig) -> dict[str, Any]:
        """The evaluated model's params a configuration learns with (what its log's events
        are defined by, such as an action range)."""
        ...

    def identified(self, records: list[Any], config: ModelConfig, path: str
                   ) -> tuple[Any, tuple[str, ...]]:
        """The events of ``records`` (event lines of the log of the model of ``config``) and
        the ``stream_id`` of each."""
        ...

    def trained(self, learner: Learner) -> Policy:
        """The policy of a trained configuration's ``learner`` as a function of a batch."""
        ...


def _keyed(records: list[Any], first_line: int, read_log: Callable[[list[Any]], ServiceLog]
           ) -> tuple[ServiceLog, np.ndarray] | None:
    """:func:`~app.evaluation.servicelog.keyed_batch` of the lines and its keys."""
    read = keyed_batch(records, first_line, read_log)
    if read is None:
        return None
    assert read.keys is not None  # keyed_batch keys every event
    return read, read.keys


class LabelShape:
    """One played label per line: ``features``, ``action``, ``propensity`` and the reward
    ``feedback.click``; IPS, SNIPS and DR with the heavy-tail guard
    (:mod:`app.evaluation.estimators`, :mod:`app.evaluation.heavy_tails`)."""

    policies: tuple[str, ...] = ("model", "model:greedy", "uniform", "logging", "fixed:N",
                                 "configuration")
    """A model's snapshot as it explores and its greedy label, uniform, logging, a fixed
    label and a configuration trained on the earlier part of the log
    (:mod:`workers.configevaluation`)."""
    noise: Noise = "click"
    kind: Kind = LABEL
    command: str | None = "app.commands.evaluate_label"
    feedback: tuple[str, ...] = LABEL_FEEDBACK

    def reads(self, line: Mapping[str, Any]) -> bool:
        return ("slots" not in line and "action" in line and "propensity" in line
                and "click" in (line.get("feedback") or {}))

    def batch(self, records: list[Any], first_line: int, config: ModelConfig,
              path: str) -> Batch | None:
        read = _keyed(records, first_line, functools.partial(
            label_log_of, n_actions=config.class_count, path=path))
        return None if read is None else (read[0].label_log(), read[1])

    def reads_snapshot(self, policy: Any) -> bool:
        return policy in ("model", "model:greedy")

    def inherited(self, config: ModelConfig) -> dict[str, Any]:
        return {}

    def identified(self, records: list[Any], config: ModelConfig, path: str
                   ) -> tuple[LabelLog, tuple[str, ...]]:
        read = label_log_of(records, config.class_count, path)
        return read.label_log(), read.stream_ids

    def trained(self, learner: Learner) -> Policy:
        """Its label distribution as it explores
        (:func:`~app.evaluation.policies.learner_policy`)."""
        return functools.partial(learner_policy, learner=learner)

    def policy(self, policy: Any, config: ModelConfig,
               state: Mapping[str, np.ndarray] | None) -> Policy:
        if policy == "uniform":
            return uniform_policy
        if policy == "logging":
            return logging_policy
        if self.reads_snapshot(policy):
            assert state is not None
            return functools.partial(learner_policy, learner=build_learner(config,
                                                                           dict(state)),
                                     greedy=policy == "model:greedy")
        return functools.partial(fixed_policy, action=int(policy.partition(":")[2]))

    def third_pass(self, sums: LabelSums) -> bool | None:
        """Each event's weight and raw click when the effective sample size is below
        :data:`~app.evaluation.heavy_tails.MIN_ESS`."""
        return True if sums.ess < MIN_ESS else None

    def gather(self, batches: Iterable[tuple[LabelLog, np.ndarray | None]],
               need: Any) -> tuple[np.ndarray, np.ndarray]:
        return label_columns(batches)

    def join(self, parts: list[tuple[np.ndarray, np.ndarray]], need: Any
             ) -> tuple[np.ndarray, np.ndarray]:
        return (np.concatenate([part[0] for part in parts]),
                np.concatenate([part[1] for part in parts]))

    def result(self, sums: LabelSums, options: Options,
               gathered: tuple[np.ndarray, np.ndarray] | None) -> dict[str, Any]:
        result = sums.evaluation(options).to_dict()
        if gathered is None:
            return result
        return guard_heavy_tails(result, gathered[0], gathered[1], options.level,
                                 options.rates())


class RankShape:
    """A ranking per line: ``features``, ``n_candidates`` and per shown slot its
    ``propensity`` and ``click``; per-slot estimators (:mod:`app.evaluation.rankings`)."""

    policies: tuple[str, ...] = (*RANK_POLICIES, "configuration")
    """Uniform, logging, and a configuration replayed progressively on a single-slot log
    that holds every candidate's features (:mod:`app.evaluation.rankreplay`, driven by
    :mod:`workers.rankconfig`)."""
    noise: Noise = "slots"
    kind: Kind = RANK
    command: str | None = "app.commands.evaluate_rank"
    feedback: tuple[str, ...] = ("clicks",)
    """A ranking's per-slot clicks (what a replayed configuration's learner learns from)."""

    def inherited(self, config: ModelConfig) -> dict[str, Any]:
        """The rank model's shape (its slots and candidates' features): a replayed
        configuration ranks the logged candidates into the logged slots."""
        return {name: config.params[name] for name in ("slots", "n_action_features")
                if name in config.params}

    def reads(self, line: Mapping[str, Any]) -> bool:
        return "slots" in line

    def batch(self, records: list[Any], first_line: int, config: ModelConfig,
              path: str) -> Batch | None:
        read = _keyed(records, first_line, functools.partial(rank_log_of, path=path))
        return None if read is None else (read[0].ranking_log(), read[1])

    def reads_snapshot(self, policy: Any) -> bool:
        return False

    def policy(self, policy: Any, config: ModelConfig,
               state: Mapping[str, np.ndarray] | None) -> Policy:
        return rank_policy(policy)

    def third_pass(self, sums: RankSums) -> list[int] | None:
        """The slots whose effective sample size is too small for the bootstrap
        (:meth:`~app.evaluation.rankings.RankSums.thin_slots`)."""
        return sums.thin_slots() or None

    def gather(self, batches: Iterable[tuple[RankLog, np.ndarray | None]],
               need: list[int]) -> Any:
        return slot_columns(batches, need)

    def join(self, parts: list[Any], need: list[int]) -> Any:
        return joined_columns(parts, need)

    def result(self, sums: RankSums, options: Options, gathered: Any) -> dict[str, Any]:
        return sums.result(options, gathered or {})


LABEL_SHAPE = LabelShape()
RANK_SHAPE = RankShape()
