"""Apprentice mode: serve the caller's own choice, learn from it, measure the agreement.

Logging mode serves and counts as apprentice mode does, and learns nothing (the
trainer logs and counts its feedback, the weights stay: :attr:`ModelConfig.learns`).

A model in apprentice mode (config ``mode``) serves with every decision the
``baseline`` the caller sends (the label, or the ranking of action ids it
would have served anyway), logged with probability 1 because the caller's
choice is deterministic, so the feedback teaches the model about the
baseline's action.  The model's own greedy choice is kept beside it: each
decision counts whether they agree (slot 0 of a ranking), and each joined
feedback adds its observed reward to the counters of all apprentice events
and of those where the model agreed (Lua steps of the store, with the
decision and with the feedback).

What the counters can tell: ``baseline_reward`` estimates the baseline's
value.  The model's own value is observed only where it agrees with the
baseline (a deterministic logger never shows what the model's other choices
would have earned), so ``model_value_estimate``, the mean reward where they
agree, is the model's value on that share of the traffic, not over all of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from app.api.errors import ApiError
from app.learners.base import Decision, Learner
from app.learners.config import ModelConfig
from app.tasks import TASKS, Task

ONLINE = "online"
APPRENTICE = "apprentice"
LOGGING = "logging"
MODES = (ONLINE, APPRENTICE, LOGGING)
#: The modes that serve the callers' baselines: ``logging`` serves them as ``apprentice``
#: does, but its feedback leaves the weights as they are (:attr:`ModelConfig.learns`).
BASELINE_MODES = (APPRENTICE, LOGGING)


def in_apprentice_mode(config: ModelConfig) -> bool:
    """Whether the model serves its callers' baselines (apprentice or logging mode; models
    without ``mode`` are online)."""
    return config.mode in BASELINE_MODES


def check_mode(mode: str, spec: Task, cls: type[Learner]) -> None:
    """422 naming ``mode`` when the model cannot run in ``mode``."""
    follows = cls.follows_baseline or spec.follow_baseline is not None
    if mode in BASELINE_MODES and (spec.reward is None or not follows):
        rewarded = " or ".join(repr(name) for name, task in TASKS.items() if task.reward)
        raise ApiError(422, "invalid_param", f"{mode} mode needs a model that learns from "
                       f"the reward of what was served (task {rewarded}, with an algorithm "
                       f"that follows a baseline); this {spec.name!r} model cannot follow a "
                       "baseline", "mode")


def label_baselines(baseline: float | list[int] | list[float] | list[str] | None,
                    instances: int | None,
                    n_classes: int) -> list[int]:
    """The caller's label per decision of a predict with ``features`` (``instances`` None) or
    that many ``instances`` (422 naming ``baseline`` when missing or misshapen)."""
    if baseline is None:
        raise ApiError(422, "invalid_param", "the model is in apprentice mode: send your own "
                       "label as baseline (one per instance with instances)", "baseline")
    labels: list[int]
    if instances is None:
        if isinstance(baseline, list):
            raise ApiError(422, "invalid_param", "with features, baseline is one label",
                           "baseline")
        labels = [cast(int, baseline)]  # (checked below)
    else:
        if not isinstance(baseline, list) or len(baseline) != instances:
            raise ApiError(422, "invalid_param", f"with instances, baseline is a list of "
                           f"{instances} labels, one per instance", "baseline")
        labels = cast("list[int]", baseline)  # (the predict schema's baseline: numbers)
    for i, label in enumerate(labels):
        if not isinstance(label, int) or label >= n_classes:
            raise ApiError(422, "invalid_param", f"baseline must be a label in [0, "
                           f"{n_classes})",
                           "baseline" if instances is None else f"baseline[{i}]")
    return labels


def follow_labels(learner: Learner, X: np.ndarray, baselines: Sequence[int]
                  ) -> tuple[list[Decision], list[bool]]:
    """Decisions serving ``baselines`` and, per decision, whether the model's greedy label
    agreed."""
    greedy = learner.decide_many(X, explore=False)
    agreed = [int(d.output["greedy_label"]) == b for d, b in zip(greedy, baselines, strict=True)]
    return [learner.follow(d, b) for d, b in zip(greedy, baselines, strict=True)], agreed


def ranking_baseline(baseline: Sequence[str] | None, ids: Sequence[str], shown: int,
                     prefix: str) -> list[int]:
    """The rows of the actions (their ``ids``) the caller's ``baseline`` ranks first, in order
    (422 naming ``baseline`` when missing, too short, or naming an id twice or not among the
    actions)."""
    if baseline is None:
        raise ApiError(422, "invalid_param", "the model is in apprentice mode: send your own "
                       "ranking of action ids as baseline", f"{prefix}baseline")
    row_of = {action_id: i for i, action_id in enumerate(ids)}
    rows: list[int] = []
    for j, action_id in enumerate(baseline):
        row = row_of.get(action_id)
        if row is None or row in rows:
            raise ApiError(422, "invalid_param", f"action id {action_id!r} is "
                           f"{'not among the actions' if row is None else 'listed twice'}",
                           f"{prefix}baseline[{j}]")
        rows.append(row)
    if len(rows) < shown:
        raise ApiError(422, "invalid_param", f"baseline must rank at least the {shown} "
                       "slots filled", f"{prefix}baseline")
    return rows


def report(counters: Mapping[str, float]) -> dict[str, Any]:
    """The ``apprentice`` block of a model from its counters
    (:data:`~app.store.models.APPRENTICE_COUNTERS`): agreement and the rewards observed."""
    decisions = int(counters.get("apprentice_decisions", 0))
    events = int(counters.get("apprentice_events", 0))
    agreed_events = int(counters.get("apprentice_agreed_events", 0))
    return {
        "decisions": decisions,
        "agreement": (counters.get("apprentice_agreed", 0) / decisions) if decisions else None,
        "events": events,
        "baseline_reward": (counters.get("apprentice_reward_sum", 0.0) / events
                            if events else None),
        "agreed_events": agreed_events,
        "model_value_estimate": (counters.get("apprentice_agreed_reward_sum", 0.0)
                                 / agreed_events if agreed_events else None),
    }
