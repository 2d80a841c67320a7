"""A task defined in the tests only, ``thumbs``: guess the thumb a user gives.

Everything a task needs, in one module: its feedback and decision schemas, the parser of
its feedback, its log shape with its own off-policy estimator and its
:class:`~app.tasks.base.Task`; its learner is :mod:`tests.tasks.thumbs_learner`.
``docs/architecture.md`` ("Adding a task") walks through the same steps;
:mod:`tests.tasks.test_thumbs` registers it (one :func:`~app.tasks.register_task` call,
its learner with it) and serves, learns, logs and evaluates it end to end.

A decision (from ``features``, the request every non-ranking task takes) is a guess,
``"up"`` or ``"down"``, drawn with a ``probability``; the feedback is the thumb the user
gave.  Its log lines hold ``features``, ``action`` (1: up guessed), ``propensity`` and
``feedback.up`` (1: the thumb was up).

**Estimator.**  The thumb is seen whatever was guessed, so a target policy ``pi``'s
agreement rate ``V(pi) = E[pi(t | x)]`` (``t`` the thumb) has the full-information
estimate ``V_full = (1/n) sum_i pi(t_i | x_i)`` beside the importance-weighted one
``V_IPS = (1/n) sum_i pi(a_i | x_i) / p_i * [a_i = t_i]`` (``a_i`` guessed with
probability ``p_i``; Horvitz and Thompson 1952).  Each comes with its normal 95% interval
``V +- 1.96 s / sqrt(n)`` (``s`` the sample standard deviation of its terms).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel

from app.evaluation.estimators import Options
from app.evaluation.streaming import Batch, Policy
from app.evaluation.sums import Kind, row_keys
from app.fields import EventId, RequestModel
from app.learners.base import Learner
from app.tasks import Task

NAME = "thumbs"
#: The guesses, by action: 0 is "down", 1 is "up".
THUMBS = ("down", "up")
#: Normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054


class ThumbsFeedback(RequestModel):
    """Feedback of a ``thumbs`` decision: the thumb the user gave."""

    event_id: EventId
    thumb: Literal["up", "down"]


class ThumbsPrediction(BaseModel):
    """A ``thumbs`` decision: the thumb guessed and the probability it was drawn with."""

    event_id: str | None = None
    model_version: int
    thumb: Literal["up", "down"]
    probability: float


def thumbs_feedback(event: ThumbsFeedback, config: Mapping[str, Any],
                    cls: type[Learner]) -> dict[str, np.ndarray]:
    """``{"up": 1.0 | 0.0}``, the field the learner reads."""
    return {"up": np.array(float(event.thumb == "up"))}


@dataclass(frozen=True)
class ThumbsLog:
    """Logged guesses: contexts ``X``, guesses ``actions`` (1: up), their
    ``propensities`` and the thumbs ``ups`` (1: up)."""

    X: np.ndarray
    actions: np.ndarray
    propensities: np.ndarray
    ups: np.ndarray

    @property
    def n(self) -> int:
        return len(self.actions)

    def rows(self, rows: slice) -> ThumbsLog:
        return ThumbsLog(self.X[rows], self.actions[rows], self.propensities[rows],
                         self.ups[rows])


@dataclass
class Counted:
    """The first pass's sums: how many events it saw (the estimators fit no reward model)."""

    n: int

    def merge(self, other: Counted) -> None:
        self.n += other.n

    def fit(self, lam: float) -> None:
        return None


def counted(log: ThumbsLog, keys: np.ndarray, options: Options) -> Counted:
    return Counted(log.n)


@dataclass
class ThumbsSums:
    """Per estimator (``ips``, ``full``), the sum of its terms and of their squares."""

    n: int
    sums: dict[str, list[float]]

    @classmethod
    def zeros(cls) -> ThumbsSums:
        return cls(0, {"ips": [0.0, 0.0], "full": [0.0, 0.0]})

    def add(self, log: ThumbsLog, target: np.ndarray | None, keys: np.ndarray,
            options: Options, model: Any) -> None:
        """Add the terms of ``log``'s events (module docstring); ``target`` is ``n x 2``
        (None: the logging policy, which guessed each ``a_i`` with ``p_i``)."""
        rows = np.arange(log.n)
        thumbs = log.ups.astype(np.int64)
        if target is None:
            w = np.ones(log.n)
            full = np.where(log.actions == thumbs, log.propensities, 1.0 - log.propensities)
        else:
            w = target[rows, log.actions] / log.propensities
            full = target[rows, thumbs]
        terms = {"ips": w * (log.actions == thumbs), "full": full}
        self.n += log.n
        for name, values in terms.items():
            self.sums[name][0] += float(values.sum())
            self.sums[name][1] += float((values * values).sum())

    def merge(self, other: ThumbsSums) -> None:
        self.n += other.n
        for name, (total, squares) in other.sums.items():
            self.sums[name][0] += total
            self.sums[name][1] += squares

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.n}
        for name, (total, squares) in self.sums.items():
            value = total / self.n
            variance = max(squares / self.n - value * value, 0.0) * self.n / max(self.n - 1, 1)
            half = Z95 * float(np.sqrt(variance / self.n))
            out[name] = {"value": value, "ci": [value - half, value + half]}
        return out


def uniform_guess(log: ThumbsLog) -> np.ndarray:
    """Either thumb with probability 1/2."""
    return np.full((log.n, 2), 0.5)


def logging_guess(log: ThumbsLog) -> None:
    """The logging policy (None: the estimators' weight 1)."""
    return None


class ThumbsShape:
    """The ``thumbs`` log: a guess per line, scored by :class:`ThumbsSums`."""

    policies: tuple[str, ...] = ("uniform", "logging")
    noise = None
    kind: Kind = Kind(counted, ThumbsSums.zeros)
    command = None

    def reads(self, line: Mapping[str, Any]) -> bool:
        return "up" in (line.get("feedback") or {})

    def batch(self, records: list[Any], first_line: int, config: Mapping[str, Any],
              path: str) -> Batch | None:
        lines = [(i, r) for i, r in enumerate(records)
                 if isinstance(r, dict) and r.get("type") == "event"]
        if not lines:
            return None
        log = ThumbsLog(X=np.array([r["features"] for _, r in lines], dtype=float),
                        actions=np.array([r["action"] for _, r in lines], dtype=np.int64),
                        propensities=np.array([r["propensity"] for _, r in lines]),
                        ups=np.array([r["feedback"]["up"] for _, r in lines]))
        return log, row_keys(np.array([first_line + i for i, _ in lines], dtype=np.int64))

    def reads_snapshot(self, policy: Any) -> bool:
        return False

    def policy(self, policy: Any, config: Mapping[str, Any],
               state: Mapping[str, np.ndarray] | None) -> Policy:
        if policy not in self.policies:
            raise ValueError(f"a thumbs log is evaluated for {self.policies}, not {policy!r}")
        return uniform_guess if policy == "uniform" else logging_guess

    def third_pass(self, sums: ThumbsSums) -> None:
        return None

    def gather(self, batches: Iterable[tuple[Any, np.ndarray | None]], need: Any) -> None:
        return None

    def join(self, parts: list[Any], need: Any) -> None:
        return None

    def result(self, sums: ThumbsSums, options: Options, gathered: Any) -> dict[str, Any]:
        return sums.result()


TASK = Task(NAME, "a guess of the thumb a user gives; feedback: the thumb, up or down",
            ThumbsFeedback, ThumbsPrediction, thumbs_feedback, has_clicks=False,
            log_shape=ThumbsShape(),
            algorithms=(("guess", "tests.tasks.thumbs_learner:ThumbsGuess"),))
