"""The ``continuous`` task: a number in the model's ``action_range`` (a price, a bid, a
threshold); feedback: a reward, or a (noisy) click worth ``click_value``.

A model names its range in its params, ``"params": {"action_range": [lo, hi]}``.  A
decision is ``action`` (drawn from the learner's smoothed policy), its density ``pdf``
under that policy, the ``greedy_action``, ``event_id`` and ``model_version``.  Feedback is
``{"event_id", "reward": r}`` or ``{"event_id", "click": true|false, "click_value": v}``
(``v`` defaults to 1; a purchase at a price sends the price, so that the learner maximises
revenue); a click is corrected for the model's click-noise rates ``rho0``/``rho1`` by the
label task's rule (:mod:`app.learners.smoothing`), rates no estimator checks
(:data:`~app.store.noise.NO_ESTIMATOR`).

In apprentice mode a decision serves the caller's action (:func:`follow_values`); a
challenger is scored by its smoothed density of each logged action
(:func:`challenger_weights`) on the rewards the learners learn
(:func:`challenger_rewards`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from pydantic import BaseModel, Field

from app.errors import ApiError
from app.evaluation.estimators import Options
from app.evaluation.servicelog import dense_vector
from app.evaluation.shapes import Noise
from app.evaluation.smoothed import SmoothedSums, smoothed_weights
from app.evaluation.streaming import Batch, Policy
from app.evaluation.sums import Kind, row_keys
from app.fields import EventId, FiniteFloat, RequestModel
from app.learners.base import Decision, Learner
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.learners.smoothing import ContinuousBandit, smoothed_pdf
from app.tasks.base import ChallengerScoring, Replay, Task
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


def _baseline_values(baseline: Any, n: int, batch: bool, lo: float, hi: float) -> np.ndarray:
    """The caller's action per decision: one number with ``features``, one per instance in a
    batch, each in ``[lo, hi]`` (422 naming ``baseline`` or ``baseline[i]``)."""
    if baseline is None:
        raise ApiError(422, "invalid_param", "the model is in apprentice mode: send your own "
                       "action as baseline (one per instance with instances)", "baseline")
    if batch != isinstance(baseline, list) or (batch and len(baseline) != n):
        raise ApiError(422, "invalid_param", f"with instances, baseline is a list of {n} "
                       "actions, one per instance" if batch else "with features, baseline is "
                       "one action", "baseline")
    values = np.array(baseline if batch else [baseline], dtype=np.float64)
    for i, value in enumerate(values):
        if not lo <= value <= hi:
            raise ApiError(422, "invalid_param", f"baseline must lie in the action range "
                           f"[{lo:g}, {hi:g}]", f"baseline[{i}]" if batch else "baseline")
    return values


def follow_values(learner: Learner, X: np.ndarray, baseline: Any, batch: bool
                  ) -> tuple[list[Decision], list[bool]]:
    """Decisions serving the caller's actions (apprentice mode) and whether the learner's
    greedy action agreed, within the smoothing half-width ``h`` of each.

    The caller's choice is deterministic; it is logged as the smoothed policy around it
    without exploration, ``pdf = 1 / |W(b)|`` with ``W(b) = [b - h, b + h]`` clipped to the
    range (:func:`app.learners.smoothing.smoothed_pdf` with ``epsilon`` 0), the density a
    point choice has once smoothed as every policy here is: the learners and the
    evaluations read the log as that policy's, as the label task logs probability 1."""
    bandit = cast(ContinuousBandit, learner)
    lo, hi = bandit.action_range
    h = bandit.half_width
    values = _baseline_values(baseline, len(X), batch, lo, hi)
    own = bandit.decide_contexts(X, explore=False)
    pdf = smoothed_pdf(values, values, lo, hi, h, 0.0)
    agreed = (np.abs(own["greedy"] - values) <= h).tolist()
    return [Decision({"action": float(a), "pdf": float(p), "greedy_action": float(g)},
                     {"x": x, "action": a, "pdf": p, "greedy": g})
            for x, a, p, g in zip(own["x"], values, pdf, own["greedy"], strict=True)], agreed


def _served_reward(fields: Mapping[str, np.ndarray]) -> float:
    """The observed reward of what was served (a click's ``click_value * click``, not
    corrected), as an apprentice's counters add it."""
    return float(fields["reward"])


def challenger_weights(learner: Learner, batch: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per logged event, ``pi_h(a_i | x_i) / pdf_i``: the challenger's smoothed density of
    the logged action ``a_i``, around its own centre for ``x_i``
    (:meth:`~app.learners.smoothing.ContinuousBandit.centres`, deterministic), over the
    logged density (the smoothed IPS weight, Kallus and Zhou 2018, Section 3, with the
    challenger's own smoothing)."""
    bandit = cast(ContinuousBandit, learner)
    X = np.atleast_2d(np.asarray(batch["x"], dtype=np.float64))
    _, centre = bandit.centres(np.hstack([np.ones((len(X), 1)), X]), True)
    action = np.asarray(batch["action"], dtype=np.float64).reshape(-1)
    out: np.ndarray = bandit.pdf(action, centre) / np.asarray(batch["pdf"],
                                                              dtype=np.float64).reshape(-1)
    return out


def challenger_rewards(batch: Mapping[str, np.ndarray], rates: tuple[float, float]
                       ) -> np.ndarray:
    """Each joined event's reward as the learners learn it at ``rates``
    (:func:`logged_rewards`)."""
    return logged_rewards(np.asarray(batch["reward"], dtype=np.float64).reshape(-1),
                          np.asarray(batch["click_value"], dtype=np.float64).reshape(-1),
                          rates)


@dataclass(frozen=True)
class ContinuousLog:
    """Logged decisions: contexts ``X``, played ``actions``, their ``pdf``, the ``reward``
    fed back (a click's ``click_value * click``) and ``click_value`` (NaN for a plain
    reward); :func:`logged_rewards` corrects the clicks."""

    X: np.ndarray
    actions: np.ndarray
    pdf: np.ndarray
    reward: np.ndarray
    click_value: np.ndarray

    @property
    def n(self) -> int:
        return len(self.actions)

    def rows(self, rows: slice) -> ContinuousLog:
        return ContinuousLog(self.X[rows], self.actions[rows], self.pdf[rows],
                             self.reward[rows], self.click_value[rows])


def logged_rewards(reward: np.ndarray, click_value: np.ndarray,
                   rates: tuple[float, float]) -> np.ndarray:
    """A plain reward as logged, a click's ``click_value * (click - rho0) / beta`` with the
    ``rates`` given (the learners' rule, :mod:`app.learners.smoothing`)."""
    rho0, rho1 = rates
    clicked = ~np.isnan(click_value)
    value = np.where(clicked, click_value, 0.0)
    out: np.ndarray = np.where(clicked, (reward - value * rho0) / (1.0 - rho0 - rho1), reward)
    return out


@dataclass
class _Counted:
    """The first pass's sums: the events seen (the estimators fit no reward model)."""

    n: int

    def merge(self, other: _Counted) -> None:
        self.n += other.n

    def fit(self, lam: float) -> None:
        return None


def _counted(log: ContinuousLog, keys: np.ndarray, options: Options) -> _Counted:
    return _Counted(log.n)


class _Sums(SmoothedSums):
    """:class:`~app.evaluation.smoothed.SmoothedSums` as the streamed evaluation adds them:
    the target is each event's smoothed weight (None: the logging policy, weight 1), the
    clicks corrected with the evaluation's rates (the model's in force, or the request's)."""

    def add(self, log: ContinuousLog, target: np.ndarray | None, keys: np.ndarray,
            options: Options, model: Any) -> None:
        rates = (options.rho0 or 0.0, options.rho1 or 0.0)
        self.add_weighted(np.ones(log.n) if target is None else target,
                          logged_rewards(log.reward, log.click_value, rates))


def _uniform(log: ContinuousLog, width: float) -> np.ndarray:
    """Weights of the uniform policy: ``(1 / (hi - lo)) / pdf``."""
    out: np.ndarray = 1.0 / (width * log.pdf)
    return out


def _fixed(log: ContinuousLog, value: float, action_range: tuple[float, float],
           h: float) -> np.ndarray:
    """Weights of ``fixed:VALUE`` smoothed with half-width ``h``."""
    return smoothed_weights(log.actions, log.pdf, np.full(log.n, value), action_range, h)


def _logging(log: ContinuousLog) -> None:
    """The logging policy (None: weight 1)."""
    return None


class ContinuousShape:
    """The ``continuous`` log: a played action and its density per line, scored by smoothed
    IPS and SNIPS (:mod:`app.evaluation.smoothed`) with the model's smoothing half-width;
    clicks corrected by one pair of rates (``noise``), which no estimator checks for this
    task (the result says so: :data:`~app.store.noise.NO_ESTIMATOR`)."""

    policies: tuple[str, ...] = ("uniform", "logging", "fixed:N")
    noise: Noise = "click"
    kind: Kind = Kind(_counted, _Sums)
    command: str | None = None

    def reads(self, line: Mapping[str, Any]) -> bool:
        return "pdf" in (line.get("context") or {}) and "reward" in (line.get("feedback") or {})

    def batch(self, records: list[Any], first_line: int, config: ModelConfig,
              path: str) -> Batch | None:
        lines = [(i, r) for i, r in enumerate(records)
                 if isinstance(r, dict) and r.get("type") == "event"]
        if not lines:
            return None
        feedback = [r["feedback"] for _, r in lines]
        click_value = np.array([np.nan if f.get("click_value") is None else f["click_value"]
                                for f in feedback], dtype=np.float64)
        log = ContinuousLog(
            X=np.array([dense_vector(r["features"]) for _, r in lines]),
            actions=np.array([r["context"]["action"] for _, r in lines], dtype=np.float64),
            pdf=np.array([r["context"]["pdf"] for _, r in lines], dtype=np.float64),
            reward=np.array([f["reward"] for f in feedback], dtype=np.float64),
            click_value=click_value)
        return log, row_keys(np.array([first_line + i for i, _ in lines], dtype=np.int64))

    def reads_snapshot(self, policy: Any) -> bool:
        return False

    def policy(self, policy: Any, config: ModelConfig,
               state: Mapping[str, np.ndarray] | None) -> Policy:
        learner = cast(ContinuousBandit, build_learner(config))
        lo, hi = learner.action_range
        if policy == "uniform":
            return functools.partial(_uniform, width=hi - lo)
        if policy == "logging":
            return _logging
        value = float(str(policy).partition(":")[2])
        if not lo <= value <= hi:
            raise ValueError(f"fixed:{value:g} lies outside the action range [{lo:g}, {hi:g}]")
        return functools.partial(_fixed, value=value, action_range=(lo, hi),
                                 h=learner.half_width)

    def third_pass(self, sums: _Sums) -> None:
        return None

    def gather(self, batches: Iterable[tuple[Any, np.ndarray | None]], need: Any) -> None:
        return None

    def join(self, parts: list[Any], need: Any) -> None:
        return None

    def result(self, sums: _Sums, options: Options, gathered: Any) -> dict[str, Any]:
        value = sums.value()
        return {"n": value.n, "ess": value.ess, "low_ess": value.low_ess,
                **{name: {"value": est.value, "ci": list(est.ci)}
                   for name, est in (("ips", value.ips), ("snips", value.snips))}}


TASK = Task(
    NAME, "a number in `params.action_range`; feedback: a reward, or a (noisy) click worth "
          "`click_value`",
    ContinuousFeedback, ContinuousPrediction, continuous_feedback, has_clicks=False,
    reward=_served_reward, follow_baseline=follow_values,
    challengers=ChallengerScoring(challenger_weights, challenger_rewards),
    log_shape=ContinuousShape(), replay=Replay("app.replay.continuous"))
