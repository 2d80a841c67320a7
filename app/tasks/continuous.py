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

In apprentice mode a decision serves the caller's action (:data:`FOLLOW_VALUES`); a
challenger is scored by its smoothed density of each logged action
(:func:`challenger_weights`) on the rewards the learners learn
(:func:`challenger_rewards`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from pydantic import BaseModel, Field

from app.errors import ApiError
from app.evaluation.estimators import Options
from app.evaluation.servicelog import dense_vector
from app.evaluation.shapes import Noise
from app.evaluation.smoothed import SmoothedSums, low_ess_flag, reward_sums
from app.evaluation.smoothed_model import SmoothedRewardModel, SmoothedRidgeSums
from app.evaluation.streaming import Batch, Policy
from app.evaluation.sums import Kind, row_keys
from app.fields import EventId, FiniteFloat, RequestModel
from app.learners.base import Decision, Learner
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.learners.smoothing import (
    DEFAULT_RANGE,
    ContinuousBandit,
    check_action_range,
    smoothed_pdf,
    window,
)
from app.tasks.base import BaselineFollower, ChallengerScoring, Replay, Task
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


def _baseline_values(baseline: Any, instances: int | None, config: ModelConfig
                     ) -> list[float]:
    """The caller's action per decision: one number with ``features``, one per instance in a
    batch, each in the model's action range (422 naming ``baseline`` or ``baseline[i]``)."""
    if baseline is None:
        raise ApiError(422, "invalid_param", "the model is in apprentice mode: send your own "
                       "action as baseline (one per instance with instances)", "baseline")
    batch = instances is not None
    if batch != isinstance(baseline, list) or (batch and len(baseline) != instances):
        raise ApiError(422, "invalid_param", f"with instances, baseline is a list of "
                       f"{instances} actions, one per instance" if batch else "with features, "
                       "baseline is one action", "baseline")
    lo, hi = check_action_range(config.params.get("action_range", DEFAULT_RANGE))
    values = [float(v) for v in (baseline if batch else [baseline])]
    for i, value in enumerate(values):
        if not lo <= value <= hi:
            raise ApiError(422, "invalid_param", f"baseline must lie in the action range "
                           f"[{lo:g}, {hi:g}]", f"baseline[{i}]" if batch else "baseline")
    return values


def follow_values(learner: Learner, X: np.ndarray, baselines: Sequence[float]
                  ) -> tuple[list[Decision], list[bool]]:
    """Decisions serving the caller's actions ``baselines`` (apprentice mode) and whether the
    learner's greedy action agreed, within the smoothing half-width ``h`` of each.

    The caller's choice is deterministic; it is logged as the smoothed policy around it
    without exploration, ``pdf = 1 / |W(b)|`` with ``W(b) = [b - h, b + h]`` clipped to the
    range (:func:`app.learners.smoothing.smoothed_pdf` with ``epsilon`` 0), the density a
    point choice has once smoothed as every policy here is: the learners and the
    evaluations read the log as that policy's, as the label task logs probability 1."""
    bandit = cast(ContinuousBandit, learner)
    lo, hi = bandit.action_range
    h = bandit.half_width
    values = np.asarray(baselines, dtype=np.float64)
    own = bandit.decide_contexts(X, explore=False)
    pdf = smoothed_pdf(values, values, lo, hi, h, 0.0)
    agreed = (np.abs(own["greedy"] - values) <= h).tolist()
    return [Decision({"action": float(a), "pdf": float(p), "greedy_action": float(g)},
                     {"x": x, "action": a, "pdf": p, "greedy": g})
            for x, a, p, g in zip(own["x"], values, pdf, own["greedy"], strict=True)], agreed


#: Apprentice mode: the caller's action served (:func:`follow_values`).
FOLLOW_VALUES = BaselineFollower(_baseline_values, follow_values)


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
    reward), in the model's ``action_range``; :meth:`rewards` corrects the clicks."""

    X: np.ndarray
    actions: np.ndarray
    pdf: np.ndarray
    reward: np.ndarray
    click_value: np.ndarray
    action_range: tuple[float, float]

    @property
    def n(self) -> int:
        return len(self.actions)

    def rows(self, rows: slice) -> ContinuousLog:
        return ContinuousLog(self.X[rows], self.actions[rows], self.pdf[rows],
                             self.reward[rows], self.click_value[rows], self.action_range)

    def logged_play(self) -> dict[str, np.ndarray]:
        """The played actions, their densities and the feedback, as the learners of
        :mod:`app.learners.smoothing` learn them (each learner corrects a click with its own
        rates)."""
        return {"action": self.actions, "pdf": self.pdf, "reward": self.reward,
                "click_value": self.click_value}

    def rewards(self, options: Options) -> np.ndarray:
        """The rewards learned, clicks corrected with the evaluation's rates (the model's in
        force, or the request's; none: not corrected)."""
        return logged_rewards(self.reward, self.click_value,
                              (options.rho0 or 0.0, options.rho1 or 0.0))


def logged_rewards(reward: np.ndarray, click_value: np.ndarray,
                   rates: tuple[float, float]) -> np.ndarray:
    """A plain reward as logged, a click's ``click_value * (click - rho0) / beta`` with the
    ``rates`` given (the learners' rule, :mod:`app.learners.smoothing`)."""
    rho0, rho1 = rates
    clicked = ~np.isnan(click_value)
    value = np.where(clicked, click_value, 0.0)
    out: np.ndarray = np.where(clicked, (reward - value * rho0) / (1.0 - rho0 - rho1), reward)
    return out


def _reward_sums(log: ContinuousLog, keys: np.ndarray, options: Options) -> SmoothedRidgeSums:
    """The first pass: the reward model's sums (:mod:`app.evaluation.smoothed_model`)."""
    return reward_sums(log.X, log.actions, log.rewards(options), keys, log.action_range,
                       options.folds, options.seed)


class _Sums(SmoothedSums):
    """:class:`~app.evaluation.smoothed.SmoothedSums` as the streamed evaluation adds them:
    the target is each event's window (None: the logging policy), the clicks corrected with
    the evaluation's rates (:meth:`ContinuousLog.rewards`)."""

    def add(self, log: ContinuousLog, target: np.ndarray | None, keys: np.ndarray,
            options: Options, model: SmoothedRewardModel) -> None:
        self.add_log(log.X, log.actions, log.pdf, log.rewards(options), target, keys, model,
                     options.seed, options.folds)


def _uniform(log: ContinuousLog) -> np.ndarray:
    """The uniform policy's window: the whole range."""
    return np.tile(np.array(log.action_range), (log.n, 1))


def _fixed(log: ContinuousLog, value: float, h: float) -> np.ndarray:
    """The windows of ``fixed:VALUE`` smoothed with half-width ``h``."""
    lo, hi = log.action_range
    return np.column_stack(window(np.full(log.n, value), lo, hi, h))


def _model(log: ContinuousLog, learner: ContinuousBandit) -> np.ndarray:
    """The windows of the model's greedy action smoothed with its half-width."""
    lo, hi = log.action_range
    greedy = learner.decide_contexts(log.X, explore=False)["greedy"]
    return np.column_stack(window(np.asarray(greedy), lo, hi, learner.half_width))


def _logging(log: ContinuousLog) -> None:
    """The logging policy (None: weight 1)."""
    return None


class ContinuousShape:
    """The ``continuous`` log: a played action and its density per line, scored by smoothed
    IPS, SNIPS and DR (:mod:`app.evaluation.smoothed`) with the model's smoothing
    half-width; clicks corrected by one pair of rates (``noise``), which no estimator
    checks for this task (the service's result says so:
    :data:`~app.store.noise.NO_ESTIMATOR`)."""

    policies: tuple[str, ...] = ("model", "uniform", "logging", "fixed:N", "configuration")
    """The model's greedy action smoothed with its bandwidth (its snapshot), uniform over
    the range, logging, a fixed value smoothed with the model's bandwidth, and a
    configuration trained on the earlier part of the log, its greedy action smoothed with
    its own bandwidth (:mod:`app.evaluation.configrun`)."""
    noise: Noise = "click"
    kind: Kind = Kind(_reward_sums, _Sums)
    command: str | None = "app.commands.evaluate_continuous"
    feedback: tuple[str, ...] = ("reward", "click_value")

    def reads(self, line: Mapping[str, Any]) -> bool:
        return "pdf" in (line.get("context") or {}) and "reward" in (line.get("feedback") or {})

    def batch(self, records: list[Any], first_line: int, config: ModelConfig,
              path: str) -> Batch | None:
        lines = [i for i, r in enumerate(records)
                 if isinstance(r, dict) and r.get("type") == "event"]
        if not lines:
            return None
        log, _ = self.identified([records[i] for i in lines], config, path)
        return log, row_keys(np.array([first_line + i for i in lines], dtype=np.int64))

    def identified(self, records: list[Any], config: ModelConfig, path: str
                   ) -> tuple[ContinuousLog, tuple[str, ...]]:
        feedback = [r["feedback"] for r in records]
        click_value = np.array([np.nan if f.get("click_value") is None else f["click_value"]
                                for f in feedback], dtype=np.float64)
        log = ContinuousLog(
            X=np.array([dense_vector(r["features"]) for r in records]),
            actions=np.array([r["context"]["action"] for r in records], dtype=np.float64),
            pdf=np.array([r["context"]["pdf"] for r in records], dtype=np.float64),
            reward=np.array([f["reward"] for f in feedback], dtype=np.float64),
            click_value=click_value,
            action_range=cast(ContinuousBandit, build_learner(config)).action_range)
        return log, tuple(str(r.get("stream_id", "")) for r in records)

    def inherited(self, config: ModelConfig) -> dict[str, Any]:
        """The model's action range: the log's actions, and the windows it is scored on,
        lie in it."""
        return {"action_range": list(cast(ContinuousBandit,
                                          build_learner(config)).action_range)}

    def trained(self, learner: Learner) -> Policy:
        """Its greedy action smoothed with its own bandwidth (as ``model`` scores a
        snapshot)."""
        return functools.partial(_model, learner=cast(ContinuousBandit, learner))

    def reads_snapshot(self, policy: Any) -> bool:
        return bool(policy == "model")

    def policy(self, policy: Any, config: ModelConfig,
               state: Mapping[str, np.ndarray] | None) -> Policy:
        learner = cast(ContinuousBandit, build_learner(
            config, None if state is None else dict(state)))
        lo, hi = learner.action_range
        if policy == "uniform":
            return _uniform
        if policy == "logging":
            return _logging
        if policy == "model":
            assert state is not None
            return functools.partial(_model, learner=learner)
        value = float(str(policy).partition(":")[2])
        if not lo <= value <= hi:
            raise ValueError(f"fixed:{value:g} lies outside the action range [{lo:g}, {hi:g}]")
        return functools.partial(_fixed, value=value, h=learner.half_width)

    def third_pass(self, sums: _Sums) -> None:
        return None

    def gather(self, batches: Iterable[tuple[Any, np.ndarray | None]], need: Any) -> None:
        return None

    def join(self, parts: list[Any], need: Any) -> None:
        return None

    def result(self, sums: _Sums, options: Options, gathered: Any) -> dict[str, Any]:
        value = sums.value()
        flag = low_ess_flag(value)
        return {"n": value.n, "ess": value.ess, "low_ess": value.low_ess, **flag,
                **{name: {"value": _finite(est.value), "ci": [_finite(e) for e in est.ci],
                          "ci_low": _finite(est.ci[0]), "ci_high": _finite(est.ci[1])}
                   for name, est in (("ips", value.ips), ("snips", value.snips),
                                     ("dr", value.dr))}}


def _finite(value: float) -> float | None:
    """``value``, or None (JSON's null) when it is not finite (SNIPS without a weighted
    event, an interval of one event)."""
    return value if np.isfinite(value) else None


TASK = Task(
    NAME, "a number in `params.action_range`; feedback: a reward, or a (noisy) click worth "
          "`click_value`",
    ContinuousFeedback, ContinuousPrediction, continuous_feedback, has_clicks=False,
    reward=_served_reward, follow_baseline=FOLLOW_VALUES,
    challengers=ChallengerScoring(challenger_weights, challenger_rewards),
    log_shape=ContinuousShape(), replay=Replay("app.replay.continuous"))
