"""The ``noisy_input`` task: a real value or a sign; feedback: the target and noisy copies of
the input, sent in parts until the learner has the copies it asks for."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from pydantic import BaseModel, Field

from app.errors import ApiError
from app.features import check_norms, feature_bound
from app.fields import MAX_PARTS, EventId, FiniteFloat, RequestModel
from app.learners.base import Learner
from app.learners.config import ModelConfig
from app.learners.kernels.functions import make_loss
from app.tasks.base import OpenPolicy, Replay, Task


class NoisyInputFeedback(RequestModel):
    """Feedback of the ``noisy_input`` task: the target and further noisy copies of the instance.

    The round needs ``copies_needed`` copies (told by predict).  When fewer
    arrive, the 202 response carries ``more_copies: k`` and the decision
    stays open; send the rest with the same ``event_id`` (``target`` may then
    be omitted).
    """

    event_id: EventId
    target: FiniteFloat | None = Field(default=None, description="required with the first "
                                                                 "part of an event")
    copies: list[list[FiniteFloat]] = Field(default_factory=list, max_length=MAX_PARTS,
                                            description="noisy copies, each of n_features")


class NoisyInputPrediction(BaseModel):
    """A decision of the ``noisy_input`` task, made from one noisy copy.

    ``copies_needed``: further noisy copies of the instance the feedback must
    carry for this round's unbiased update; ``label`` (the sign of
    ``value``) for classification losses.
    """

    event_id: str | None = Field(default=None, description="absent with explore: false")
    value: float
    copies_needed: int
    label: int | None = None
    model_version: int


def noisy_input_feedback(event: NoisyInputFeedback, config: ModelConfig,
                         cls: type[Learner]) -> dict[str, np.ndarray]:
    """``copies`` as a ``(k, n_features)`` array and ``target`` (when given)."""
    d = config.n_features
    for i, row in enumerate(event.copies):
        if len(row) != d:
            raise ApiError(422, "invalid_feedback", f"each copy has n_features = {d} numbers, "
                           f"got {len(row)}", f"copies[{i}]")
    fields = {"copies": np.array(event.copies, dtype=np.float64).reshape(len(event.copies), d)}
    check_norms(fields["copies"], feature_bound(config), "copies", "copies[{}]")
    params = config.params
    if (event.target is not None and make_loss(params["loss"], params["smoothing"]).classification
            and event.target not in (-1.0, 1.0)):
        raise ApiError(422, "invalid_feedback", f"loss {params['loss']!r} is a classification "
                       "loss: target must be -1 or +1", "target")
    if event.target is not None:
        fields["target"] = np.array(event.target, dtype=np.float64)
    return fields


def _copies_needed(learner: Learner, context: Mapping[str, np.ndarray],
                   fields: Mapping[str, np.ndarray]) -> int:
    return int(learner.copies_needed(context))  # type: ignore[attr-defined]


TASK = Task(
    "noisy_input", "a real value or a sign; feedback: the target and noisy copies of the input",
    NoisyInputFeedback, NoisyInputPrediction, noisy_input_feedback, has_clicks=False,
    open_feedback=OpenPolicy("copies", "more_copies", ("target",), _copies_needed,
                             budgeted=False, enqueue_on_expiry=False),
    replay=Replay("app.replay.noisy_input"))
