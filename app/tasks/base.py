"""What a task is: the :class:`Task` declaration every module of :mod:`app.tasks` makes.

A task says what a model decides and what it learns from: the schemas of its
feedback and of its decision (defined in the task's module), how a raw feedback
event becomes the learner's feedback arrays (and, for feedback that names what a
decision showed, how it joins the logged context), the reward an apprentice
decision counts, whether its learners take ``n_classes`` or rank candidates, the
runner that replays it and the shape its decision log is evaluated as
(:mod:`app.evaluation.shapes`).  The service (its schema unions included), the
replay command, the docs generator and the evaluations read these declarations
and name no task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from app.errors import ApiError, validation_error
from app.evaluation.shapes import LogShape
from app.learners.base import Decision, Learner
from app.learners.config import ModelConfig

FeedbackParser = Callable[[Any, ModelConfig, type[Learner]], dict[str, np.ndarray]]
QuickParser = Callable[[Any, type[Learner]], tuple[str, dict[str, np.ndarray]] | None]
ContextJoin = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]],
                       dict[str, np.ndarray]]
WantedCount = Callable[[Learner, Mapping[str, np.ndarray], Mapping[str, np.ndarray]], int]


@dataclass(frozen=True)
class OpenPolicy:
    """How a task's decision stays open until enough feedback parts arrived.

    The first part's ``part_field`` rows (noisy labels, noisy copies) are counted
    against ``first_wanted``; while fewer arrived, the 202 response says
    ``reply: k`` and later parts (same ``event_id``) append rows.  ``fixed``
    fields come with the first part; later parts repeat them or omit them.
    See :mod:`app.api.openfeedback`.
    """

    part_field: str
    reply: str
    fixed: tuple[str, ...]
    first_wanted: WantedCount
    """(learner, logged context, first part's fields) -> rows wanted in total."""
    budgeted: bool
    """Whether a model's ``label_budget`` may raise the wanted count of a 1-row first part."""
    enqueue_on_expiry: bool
    """Whether an open decision that times out is learned from with the rows received."""


@dataclass(frozen=True)
class BaselineFollower:
    """How a task whose baseline is not a label serves the caller's baselines (apprentice
    mode; its learners need not declare ``follows_baseline``)."""

    parse: Callable[[Any, int | None, ModelConfig], list[Any]]
    """(the predict's ``baseline`` as sent, the number of ``instances`` or None for one
    ``features``, the model's config) -> one baseline per decision (ApiError 422 naming
    ``baseline`` or ``baseline[i]`` for a bad one)."""
    follow: Callable[[Learner, np.ndarray, Sequence[Any]], tuple[list[Decision], list[bool]]]
    """(learner, inputs, their baselines) -> the decisions serving them and, per decision,
    whether the learner's own choice agreed."""


@dataclass(frozen=True)
class ChallengerScoring:
    """How challengers of a task whose feedback is not a click are scored on its events
    (:mod:`workers.challengers`): their sums add rewards already corrected at the rates in
    force, read without further correction."""

    weights: Callable[[Learner, Mapping[str, np.ndarray]], np.ndarray]
    """(challenger, joined batch) -> each event's importance weight of the challenger's
    policy against the logged play, before it learns the batch."""
    rewards: Callable[[Mapping[str, np.ndarray], tuple[float, float]], np.ndarray]
    """(joined batch, the model's rates ``(rho0, rho1)``) -> each event's reward, as the
    learners learn it."""


@dataclass(frozen=True)
class Replay:
    """How ``noisyloop replay`` runs a task."""

    runner: str
    """The runner module (``add_arguments(group)``, ``run(args, seed, progress)``),
    imported when the task is replayed: it may need the ``lab`` extra."""
    service: bool = False
    """Whether ``--service URL`` can replay it through a running service."""
    drift: bool = False
    """Whether ``--drift`` applies (:mod:`app.replay.drift`)."""
    service_defaults: bool = False
    """Whether the runner builds the learner of a simulated stream with its class's
    ``service_defaults`` (the model a service would hold); a log's replay keeps the class's
    own defaults."""


@dataclass(frozen=True)
class Task:
    """Everything the rest of the system needs to know about one task."""

    name: str
    decides: str
    """What a decision is and what feedback it learns from (one line of the docs)."""
    feedback_model: type[BaseModel]
    prediction_model: type[BaseModel]
    feedback_fields: FeedbackParser
    """(validated event, model config, learner class) -> feedback arrays, or ApiError.
    Examples without a prior decision (no ``event_id``) also get their input as ``x``."""
    has_clicks: bool
    """Whether an unanswered decision may become a no-click event."""
    needs_classes: bool = False
    """Whether a model takes ``n_classes`` (its learners do)."""
    candidates: bool = False
    """Whether a decision ranks candidate actions sent with the request (``POST .../rank``,
    its learners rank candidates) instead of deciding from features alone."""
    open_feedback: OpenPolicy | None = None
    """Feedback in parts (more labels / copies), or None: one event joins at once."""
    quick_feedback: QuickParser | None = None
    """(raw event, learner class) -> ``(event_id, feedback arrays)`` of the task's most
    common event shape, without building its pydantic model; None for any other raw
    event (the full validation then parses it, errors included)."""
    join_context: ContextJoin | None = None
    """(parsed feedback, logged context) -> the feedback arrays to join, or ApiError: for
    feedback that refers to what the decision showed (read before the exactly-once join);
    None: the parsed arrays join as they are."""
    add_feedback: Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]],
                           dict[str, np.ndarray]] | None = None
    """(joined feedback so far, a later joined feedback) -> their sum, for a model whose
    ``feedback.aggregation`` is ``sum``; None: its feedback is not summed."""
    reward: Callable[[Mapping[str, np.ndarray]], float] | None = None
    """(joined feedback arrays) -> the observed reward of what was served (the click; slot 0's
    for a ranking), counted for the decisions made in apprentice mode; None: no apprentice
    mode."""
    follow_baseline: BaselineFollower | None = None
    """Apprentice mode of a task whose baseline is not a label; None: a label, followed by
    learners that declare ``follows_baseline`` (:mod:`app.api.apprentice`)."""
    challengers: ChallengerScoring | None = None
    """How challengers are scored when its feedback is not a click (None: the click's
    rule, or a task whose models have no challengers)."""
    log_shape: LogShape | None = None
    """How its decision log is evaluated off-policy (:mod:`app.evaluation.shapes`); None:
    its log is not evaluated."""
    replay: Replay | None = None
    """How ``noisyloop replay`` runs it; None: it is not replayed."""
    algorithms: tuple[tuple[str, str], ...] = ()
    """Its own learners beyond :data:`app.learners.registry.ALGORITHMS`, as ``(algorithm,
    "module:Class")`` pairs (the first its default), registered with it by
    :func:`app.tasks.register_task`: a task defined outside ``app/`` (a test's own task)
    brings its learner with it; the project's tasks list theirs in ``ALGORITHMS``."""

    @property
    def evaluation_policies(self) -> tuple[str, ...]:
        """The kinds of policy (:func:`app.evaluation.policies.policy_kind`) a queued
        evaluation of the task's decision log takes; empty: its log is not evaluated."""
        return self.log_shape.policies if self.log_shape is not None else ()

    def parse_feedback(self, raw: Any, config: ModelConfig, cls: type[Learner],
                       prefix: str = "") -> tuple[str | None, dict[str, np.ndarray]]:
        """Validate one raw event; return ``(event_id, feedback arrays)``.

        ``event_id`` is None for an example posted without a prior decision
        (its arrays then hold its input ``x``).
        """
        if self.quick_feedback is not None:
            quick = self.quick_feedback(raw, cls)
            if quick is not None:
                return quick
        if isinstance(raw, self.feedback_model):
            event = raw
        else:
            try:
                event = self.feedback_model.model_validate(raw)
            except ValidationError as exc:
                raise validation_error(exc.errors(), prefix,
                                       fields=list(self.feedback_model.model_fields),
                                       what=f"feedback of a {self.name!r} model") from None
        try:
            return (getattr(event, "event_id", None),
                    self.feedback_fields(event, config, cls))
        except ApiError as exc:
            if prefix and exc.field:
                exc.field = f"{prefix}.{exc.field}"
            raise

    def prediction(self, output: Mapping[str, Any], event_id: str | None,
                   version: int) -> dict[str, Any]:
        """Response fields of one decision (only the fields of the response model)."""
        out = {name: output[name] for name in _field_names(self.prediction_model)
               if name in output and output[name] is not None}
        out["model_version"] = version
        if event_id is not None:
            out["event_id"] = event_id
        return out


@cache
def _field_names(model: type[BaseModel]) -> tuple[str, ...]:
    """A response model's field names (read once: the per-decision path needs them)."""
    return tuple(model.model_fields)
