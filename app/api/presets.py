"""Presets: named sets of defaults a model starts from (``POST /v1/models {"preset": ...}``).

A preset fills the fields of a model's creation request that the request leaves out (the
request's own fields win), and may set the learner's exploration share through the
capability the learner declares (:attr:`~app.learners.base.Learner.exploration_param`), so
that no preset names an algorithm: the task's default learner serves it unless the request
names another.

``personalizer`` is a loop as Azure AI Personalizer ran it: a ``rank`` model choosing one
action out of candidates whose features are hashed feature dictionaries
(:mod:`app.api.personalizer`), rewards in ``[0, 1]``, the reward wait time of 10 minutes
after which an event without reward gets the default reward 0, 20 % exploration; its
decisions log every candidate's features (:func:`logs_candidates`), so that its evaluations
can replay other policies on its log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Preset:
    """A named set of defaults: the request fields it fills, the exploration share (None:
    the learner's own) and whether a ranking logs every candidate's features (as it does
    while the model has challengers): what replaying another policy on the log needs."""

    fields: Mapping[str, Any]
    exploration: float | None = None
    description: str = ""
    candidates: bool = False


#: Context and action features a ``personalizer`` loop hashes its feature dictionaries into.
PERSONALIZER_CONTEXT_FEATURES = 32
PERSONALIZER_ACTION_FEATURES = 16
#: Personalizer's reward wait time (10 minutes) and exploration share (20 %).
PERSONALIZER_WAIT_SECONDS = 600
PERSONALIZER_EXPLORATION = 0.2

PRESETS: dict[str, Preset] = {
    "personalizer": Preset(
        fields={"task": "rank", "n_features": PERSONALIZER_CONTEXT_FEATURES,
                "n_action_features": PERSONALIZER_ACTION_FEATURES, "slots": 1,
                "feedback": {"wait_seconds": PERSONALIZER_WAIT_SECONDS,
                             "on_timeout": "no_click"}},
        exploration=PERSONALIZER_EXPLORATION, candidates=True,
        description="an Azure AI Personalizer loop: rank one action out of candidates with "
                    "feature dictionaries, rewards in [0, 1] (default 0 after 10 minutes), "
                    "20% exploration; its SDKs call {base}/v1/models/{model_id}/personalizer"),
}


def with_preset(data: Any) -> Any:
    """A creation request's body with its preset's fields filled in where it leaves them
    out (unchanged without a preset, or with an unknown one: the schema refuses it)."""
    if not isinstance(data, dict):
        return data
    name = data.get("preset")
    preset = PRESETS.get(name) if isinstance(name, str) else None
    if preset is None:
        return data
    return {**preset.fields, **data}


def preset_params(name: str | None, exploration_param: str | None) -> dict[str, Any]:
    """The learner params a preset sets: its exploration share under the learner's
    exploration param (none when the learner declares none)."""
    preset = PRESETS.get(name) if name is not None else None
    if preset is None or preset.exploration is None or exploration_param is None:
        return {}
    return {exploration_param: preset.exploration}


def logs_candidates(name: str | None) -> bool:
    """Whether a model of preset ``name`` logs every candidate's features with each ranking
    (:class:`Preset`)."""
    preset = PRESETS.get(name) if name is not None else None
    return preset is not None and preset.candidates
