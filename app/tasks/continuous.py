"""The ``continuous`` task: a number in the model's ``action_range`` (a price, a bid, a
threshold); feedback: a reward, or a (noisy) click worth ``click_value``.

A model names its range in its params, ``"params": {"action_range": [lo, hi]}``.  A
decision is ``action`` (drawn from the learner's smoothed policy), its density ``pdf``
under that policy, the ``greedy_action``, ``event_id`` and ``model_version``.  Feedback is
``{"event_id", "reward": r}`` or ``{"event_id", "click": true|false, "click_value": v}``
(``v`` defaults to 1; a purchase at a price sends the price, so that the learner maximises
revenue); a click is corrected for the model's click-noise rates ``rho0``/``rho1`` by the
label task's rule (:mod:`app.learners.smoothing`).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from app.errors import ApiError
from app.fields import EventId, FiniteFloat, RequestModel
from app.learners.base import Learner
from app.learners.config import ModelConfig
from app.tasks.base import Replay, Task
from app.tasks.label import Click

NAME = "continuous"


class ContinuousFeedback(RequestModel):
    """Feedback of the ``continuous`` task: a ``reward``, or a ``click`` (a purchase, a
    conversion) worth ``click_value`` (1 when omitted), noise-corrected with the model's
    rates."""

    event_id: EventId
    reward: FiniteFloat | None = Field(default=None, description="the reward observed")
    click: Click | None = Field(default=None, description="a (noisy) click, instead of a reward")
    click_value: FiniteFloat | None = Field(
        default=None, description="what a click is worth (with click; default 1), e.g. the "
                                  "price of a purchase")


class ContinuousPrediction(BaseModel):
    """A decision of the ``continuous`` task."""

    event_id: str | None = Field(default=None, description="absent with explore: false")
    action: float
    pdf: float = Field(description="the action's probability density under the policy")
    greedy_action: float
    model_version: int


def continuous_feedback(event: ContinuousFeedback, config: ModelConfig,
                        cls: type[Learner]) -> dict[str, np.ndarray]:
    """``reward`` and ``click_value`` (NaN for a plain reward; a click's reward is
    ``click_value * click``), as the learners of :mod:`app.learners.smoothing` read them."""
    if event.click is None:
        if event.click_value is not None:
            raise ApiError(422, "invalid_feedback", "click_value goes with a click",
                           "click_value")
        if event.reward is None:
            raise ApiError(422, "invalid_feedback", "send 'reward' (a number) or 'click' "
                           "(true|false, with an optional 'click_value')", "reward")
        return {"reward": np.array(float(event.reward)), "click_value": np.array(np.nan)}
    if event.reward is not None:
        raise ApiError(422, "invalid_feedback", "send either 'reward' or 'click', not both",
                       "reward")
    value = 1.0 if event.click_value is None else float(event.click_value)
    return {"reward": np.array(value * float(event.click)), "click_value": np.array(value)}


TASK = Task(
    NAME, "a number in `params.action_range`; feedback: a reward, or a (noisy) click worth "
          "`click_value`",
    ContinuousFeedback, ContinuousPrediction, continuous_feedback, has_clicks=False,
    replay=Replay("app.replay.continuous"))
