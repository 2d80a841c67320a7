"""Personalizer's service configuration as a view of a noisyloop model's own settings.

``GET .../configurations/service`` shows the model's settings under Personalizer's names;
``PUT`` changes those that map onto a setting and refuses, naming it, a change of any other
(an unchanged value is accepted, so a configuration read, edited and written back works):

- ``rewardWaitTime``: ``feedback.wait_seconds`` (ISO 8601 duration, 1 s to 30 days);
- ``defaultReward``: 0 is ``feedback.on_timeout: no_click``; other values are refused;
- ``rewardAggregation``: ``feedback.aggregation``: ``earliest`` (the first reward joins at
  once, exactly once) or ``sum`` (the rewards are added up until the reward wait time
  passed, then learned once: :mod:`app.api.openfeedback`);
- ``explorationPercentage``: the learner's exploration share (its declared
  :attr:`~app.learners.base.Learner.exploration_param`);
- ``learningMode``: ``Online`` / ``Apprentice`` / ``LoggingOnly`` is the model's ``mode``
  (``online`` / ``apprentice`` / ``logging``);
- ``isInferenceExplainabilityEnabled``: ``explain_scores`` (each rank answer explains its
  scores; for learners that declare ``explains_scores``);
- ``isAutoOptimizationEnabled`` with ``autoOptimizationFrequency``: ``auto_optimize_seconds``
  (:mod:`workers.autooptimize`; the frequency from PT1M to P90D, by default
  :data:`DEFAULT_AUTO_OPTIMIZATION_SECONDS`; for learners that declare an exploration
  share, the setting it searches).

The other fields are shown with the values that describe the service (the trainer
publishes after every batch: ``modelExportFrequency`` ``PT0S``; the decision log's
retention in days, -1 without an age limit; no log mirror).
"""

from __future__ import annotations

import math
import re
from typing import Any

from app.api.errors import ApiError
from app.api.evaluable import configuration_refusal
from app.learners.config import ModelConfig
from app.tasks import get_task

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")
#: Longest reward wait: as noisyloop's ``feedback.wait_seconds``.
MAX_WAIT_SECONDS = 30 * 86400
#: Personalizer's learning modes and noisyloop's.
MODES = {"Online": "online", "Apprentice": "apprentice", "LoggingOnly": "logging"}
_LEARNING_MODES = {mode: name for name, mode in MODES.items()}
#: Auto-optimization's frequency when enabled without one (a week), and its bounds.
DEFAULT_AUTO_OPTIMIZATION_SECONDS = 7 * 86400
AUTO_OPTIMIZATION_SECONDS = (60, 90 * 86400)
#: Personalizer's reward aggregations (each a ``feedback.aggregation`` of the same name).
AGGREGATIONS = ("earliest", "sum")


def parse_duration(text: Any, field: str) -> float:
    """Seconds of an ISO 8601 duration of days, hours, minutes and seconds; 400 naming
    ``field`` otherwise.

    >>> parse_duration("PT10M", "x"), parse_duration("P1DT1.5S", "x")
    (600.0, 86401.5)
    """
    match = _DURATION.match(text) if isinstance(text, str) and text != "P" else None
    if match is None or text.endswith("T"):
        raise ApiError(422, "invalid_configuration", f"{text!r:.60} is no ISO 8601 duration "
                       "of days, hours, minutes and seconds (e.g. PT10M)", field)
    days, hours, minutes, seconds = (float(g or 0) for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def format_duration(seconds: float) -> str:
    """``seconds`` as an ISO 8601 duration.

    >>> format_duration(600), format_duration(90061), format_duration(0)
    ('PT10M', 'P1DT1H1M1S', 'PT0S')
    """
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    time = "".join(f"{v}{u}" for v, u in ((hours, "H"), (minutes, "M"), (secs, "S")) if v)
    out = f"P{days}D" if days else "P"
    return out + (f"T{time}" if time else "" if days else "T0S")


def _exploration_param(config: ModelConfig) -> str | None:
    return config.learner_class.exploration_param


def service_configuration(config: ModelConfig, log_max_age: float) -> dict[str, Any]:
    """Personalizer's service configuration of a model (module docstring)."""
    param = _exploration_param(config)
    feedback = config.feedback
    return {
        "rewardWaitTime": format_duration(feedback.wait_seconds),
        "defaultReward": 0.0 if feedback.on_timeout == "no_click" else None,
        "rewardAggregation": feedback.aggregation,
        "explorationPercentage": None if param is None else config.params[param],
        "learningMode": _LEARNING_MODES.get(config.mode, "Online"),
        "modelExportFrequency": "PT0S",
        "modelRetrainDays": 0,
        "logRetentionDays": math.ceil(log_max_age / 86400) if log_max_age else -1,
        "isAutoOptimizationEnabled": config.auto_optimize_seconds is not None,
        "autoOptimizationFrequency": (None if config.auto_optimize_seconds is None else
                                      format_duration(config.auto_optimize_seconds)),
        "logMirrorEnabled": False,
        "isInferenceExplainabilityEnabled": config.explain_scores,
    }


def _frequency(value: Any) -> int:
    """``autoOptimizationFrequency`` in whole seconds (400 naming it out of bounds)."""
    seconds = parse_duration(value, "autoOptimizationFrequency")
    low, high = AUTO_OPTIMIZATION_SECONDS
    if not low <= seconds <= high or seconds != int(seconds):
        raise ApiError(422, "invalid_configuration", "autoOptimizationFrequency must be whole "
                       f"seconds from PT1M to P90D, got {value!r:.40}",
                       "autoOptimizationFrequency")
    return int(seconds)


def _refuse(name: str, value: Any, why: str) -> ApiError:
    return ApiError(422, "unsupported_configuration", f"{name} {value!r:.60} is not "
                    f"supported: {why}", name)


def configured(config: ModelConfig, body: Any, log_max_age: float) -> ModelConfig:
    """The model's config with ``body`` (a service configuration) applied; 400 naming the
    first field that is invalid, unknown, or a change noisyloop does not support."""
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", "the service configuration is a JSON object")
    shown = service_configuration(config, log_max_age)
    feedback: dict[str, Any] = {}
    params = dict(config.params)
    changes: dict[str, Any] = {}
    for name, value in body.items():
        if name == "rewardWaitTime":
            wait = parse_duration(value, name)
            if not 1 <= wait <= MAX_WAIT_SECONDS or wait != int(wait):
                raise ApiError(422, "invalid_configuration", f"{name} must be whole seconds "
                               f"from PT1S to P30D, got {value!r}", name)
            feedback.update(wait_seconds=int(wait))
        elif name == "explorationPercentage":
            param = _exploration_param(config)
            if param is None:
                raise _refuse(name, value, "the model's learner has no exploration share")
            if (not isinstance(value, int | float) or isinstance(value, bool)
                    or not 0 <= value <= 1):
                raise ApiError(422, "invalid_configuration",
                               f"{name} must be a number in [0, 1], got {value!r:.60}", name)
            params[param] = float(value)
        elif name == "rewardAggregation":
            if value not in AGGREGATIONS:
                raise _refuse(name, value, "noisyloop adds up rewards with " +
                              " or ".join(AGGREGATIONS))
            if value == "sum" and get_task(config.task).add_feedback is None:
                raise _refuse(name, value, f"a {config.task!r} model does not add up rewards")
            if value != config.feedback.aggregation:
                feedback.update(aggregation=value)
        elif name == "learningMode":
            if value not in MODES:
                raise _refuse(name, value, "noisyloop serves " + ", ".join(MODES))
            changes.update(mode=MODES[value])
        elif name == "isInferenceExplainabilityEnabled":
            if not isinstance(value, bool):
                raise ApiError(422, "invalid_configuration", f"{name} must be true or false",
                               name)
            if value and not config.learner_class.explains_scores:
                raise _refuse(name, value, "the model's learner does not split its scores")
            changes.update(explain_scores=value)
        elif name == "isAutoOptimizationEnabled":
            if not isinstance(value, bool):
                raise ApiError(422, "invalid_configuration", f"{name} must be true or false",
                               name)
            why = configuration_refusal(config) or (
                None if _exploration_param(config) else "its learner has no exploration "
                "share to search")
            if value and why is not None:
                raise _refuse(name, value, why)
            frequency = body.get("autoOptimizationFrequency")
            changes.update(auto_optimize_seconds=(
                None if not value else _frequency(frequency) if frequency is not None
                else config.auto_optimize_seconds or DEFAULT_AUTO_OPTIMIZATION_SECONDS))
        elif name == "autoOptimizationFrequency":
            if value is not None and "isAutoOptimizationEnabled" not in body:
                changes.setdefault("auto_optimize_seconds", (
                    _frequency(value) if config.auto_optimize_seconds is not None
                    else None))
        elif name == "defaultReward":
            if value != shown[name] and not (value == 0 and shown[name] is None):
                raise _refuse(name, value, "an event without reward is learned as reward 0")
            feedback.update(on_timeout="no_click")
        elif name in shown:
            if value != shown[name]:
                raise _refuse(name, value, f"noisyloop's is {shown[name]!r}")
        elif name not in ("lastConfigurationEditDate", "latestApprenticeModeMetrics",
                          "autoOptimizationStartDate", "logMirrorSasUri"):
            raise ApiError(422, "invalid_configuration", f"no service configuration field "
                           f"{name!r}", name)
        elif value is not None and name in ("logMirrorSasUri", "autoOptimizationStartDate"):
            raise _refuse(name, value, "auto-optimization runs every "
                          "autoOptimizationFrequency from when it is enabled, and no log "
                          "mirror yet" if name == "autoOptimizationStartDate"
                          else "no log mirror yet")
    return config.updated(**changes, feedback=config.feedback.model_copy(update=feedback),
                          params=params)
