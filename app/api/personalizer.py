"""Azure AI Personalizer's requests and answers, translated to and from noisyloop's.

The Personalizer routes (:mod:`app.api.routes.personalizer`) read a Personalizer body
here, turn it into noisyloop's own request (a rank of one slot, a rank feedback naming the
chosen action's reward, an activation), and write the answer and every error in
Personalizer's shapes, so that its SDKs work unchanged.

Features.  A Personalizer feature list (``contextFeatures``, an action's ``features``) is
a list of objects; each object's values are flattened into named features: a nested object
adds its key to the name (``{"user": {"profile": {"tier": "gold"}}}`` is
``user.profile.tier``), a list adds the item's index (``user.tags[0]``), a string is
categorical (the feature ``name=value`` with value 1, as noisyloop's named features are), a
number is its value, a boolean 1 or 0, a null nothing (names and string values of 1 to 256
characters).  The names are then hashed into the
model's features as every named feature is (:func:`app.features.to_vector`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from app.api.decisionrequest import Candidates, DecisionOptions, DecisionRequest
from app.api.errors import ApiError, validation_error
from app.api.responses import OrjsonResponse
from app.features import hash_feature, named_term
from app.fields import MAX_NAME_CHARS, MAX_NAMED, NamedFeatures

#: The api-version of ``azure-ai-personalizer`` 1.0.0b1's routes.
API_VERSION = "2022-09-01-preview"
#: Most actions one rank takes (Personalizer's limit).
MAX_ACTIONS = 50
#: Longest event id (Personalizer's limit) and action id.
MAX_ID_CHARS = 256
#: Deepest nesting of a feature object that is flattened.
MAX_FEATURE_DEPTH = 8

#: One action ranked: its id and named features.
Candidate = tuple[str, Mapping[str, float | str]]

PersonalizerId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]
#: An event id: also a path segment of its reward and activation (so without "/").
EventId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS,
                                           pattern=r"^[^/]+$")]


class PersonalizerBody(BaseModel):
    """A Personalizer request body: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")


class RankableAction(PersonalizerBody):
    """An action to rank: its id and feature objects."""

    id: PersonalizerId
    features: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_NAMED)


class RankRequest(PersonalizerBody):
    """Body of a single-slot Rank."""

    contextFeatures: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_NAMED)
    actions: list[RankableAction] = Field(min_length=1, max_length=MAX_ACTIONS)
    excludedActions: list[PersonalizerId] = Field(default_factory=list,
                                                  max_length=MAX_ACTIONS)
    eventId: EventId | None = None
    deferActivation: bool = False


class RewardRequest(PersonalizerBody):
    """Body of a Reward: the reward of the event's ``rewardActionId``."""

    value: float = Field(ge=0, le=1, allow_inf_nan=False)


def parse(model: type[BaseModel], body: Any) -> Any:
    """``body`` (parsed JSON) read as ``model``; 400 naming the field otherwise."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise validation_error(exc.errors(), model=model) from None


def flatten(objects: Sequence[Mapping[str, Any]], field: str) -> dict[str, float | str]:
    """The named features of a Personalizer feature list (module docstring); 400 naming the
    path of a value that is no string, number, boolean, null, object or list.

    >>> flatten([{"user": {"tier": "gold", "age": 31, "new": True}}, {"tags": ["a", 2]}], "f")
    {'user.tier': 'gold', 'user.age': 31.0, 'user.new': 1.0, 'tags[0]': 'a', 'tags[1]': 2.0}
    """
    out: dict[str, float | str] = {}

    def visit(value: Any, name: str, path: str, depth: int) -> None:
        if value is None:
            return
        if depth and not 1 <= len(name) <= MAX_NAME_CHARS:
            raise ApiError(422, "invalid_features", f"a feature name must have 1 to "
                           f"{MAX_NAME_CHARS} characters, got {len(name)}", path)
        if isinstance(value, str) and len(value) > MAX_NAME_CHARS:
            raise ApiError(422, "invalid_features", f"a string feature value may have "
                           f"{MAX_NAME_CHARS} characters at most", path)
        if isinstance(value, bool):
            out[name] = 1.0 if value else 0.0
        elif isinstance(value, int | float):
            if not math.isfinite(value):
                raise ApiError(422, "invalid_features", "feature values must be finite", path)
            out[name] = float(value)
        elif isinstance(value, str):
            out[name] = value
        elif depth >= MAX_FEATURE_DEPTH:
            raise ApiError(422, "invalid_features", f"features nest deeper than "
                           f"{MAX_FEATURE_DEPTH} levels", path)
        elif isinstance(value, dict):
            for key, item in value.items():
                visit(item, f"{name}.{key}" if name else str(key), f"{path}.{key}", depth + 1)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                visit(item, f"{name}[{i}]", f"{path}[{i}]", depth + 1)
        else:
            raise ApiError(422, "invalid_features", f"unsupported feature value {value!r:.60}",
                           path)

    for i, obj in enumerate(objects):
        visit(obj, "", f"{field}[{i}]", 0)
    if len(out) > MAX_NAMED:
        raise ApiError(422, "invalid_features", f"more than {MAX_NAMED} features", field)
    return out


def decision_request(body: RankRequest, baseline: bool) -> tuple[DecisionRequest, list[str]]:
    """noisyloop's single-slot rank of the actions not excluded (400 when none is left), and
    the excluded action ids in their order; with ``baseline`` the first action not excluded
    is the baseline served (Personalizer's apprentice mode)."""
    excluded = set(body.excludedActions)
    ranked = [a for a in body.actions if a.id not in excluded]
    if not ranked:
        raise ApiError(422, "invalid_actions", "every action is excluded: at least one must "
                       "be left to rank", "excludedActions")
    features = [NamedFeatures(named=flatten(a.features, f"actions[{i}].features"))
                for i, a in enumerate(body.actions) if a.id not in excluded]
    ids = [a.id for a in ranked]
    options = DecisionOptions(explore=True, defer=body.deferActivation, slots=1,
                              baseline=ids if baseline else None)
    context = NamedFeatures(named=flatten(body.contextFeatures, "contextFeatures"))
    return (DecisionRequest([context], [Candidates(ids, list(features))], [options], False),
            [a.id for a in body.actions if a.id in excluded])


def rank_response(event_id: str, ids: Sequence[str], chosen: str, chosen_probability: float,
                  probabilities: np.ndarray | None, excluded: Sequence[str],
                  explained: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Personalizer's rank answer: every action once, the chosen one first with the
    probability it was logged with, the others by their probability of being chosen (None:
    the baseline was served, they had none), the excluded ones last with 0; with
    ``explained``, its ``inferenceExplanation``."""
    rest = [(i, 0.0 if probabilities is None else float(probabilities[k]))
            for k, i in enumerate(ids) if i != chosen]
    rest.sort(key=lambda pair: -pair[1])
    ranking = [{"id": chosen, "probability": chosen_probability},
               *({"id": i, "probability": p} for i, p in rest),
               *({"id": i, "probability": 0.0} for i in excluded)]
    out = {"ranking": ranking, "eventId": event_id, "rewardActionId": chosen}
    if explained is not None:
        out["inferenceExplanation"] = explained
    return out


#: The name of a score's constant term in an inference explanation.
INTERCEPT = "(intercept)"


def explanation(context: Mapping[str, float | str], actions: Sequence[Candidate],
                effects: tuple[float, np.ndarray, np.ndarray]) -> list[dict[str, Any]]:
    """``inferenceExplanation``: per action ranked, each feature's name, value and score
    (its term in the action's score, from the learner's
    :meth:`~app.learners.rank.RidgeRanker.feature_effects`: the feature's hashed value
    times the effect of its bucket), the constant term first; the scores add up to the
    action's score."""
    w0, context_effects, action_effects = effects

    def terms(named: Mapping[str, float | str], row: np.ndarray) -> list[dict[str, Any]]:
        out = []
        for name, value in named.items():
            key, amount = named_term(name, value)
            bucket, sign = hash_feature(key, row.shape[0])
            out.append({"name": name, "value": value,
                        "score": sign * amount * float(row[bucket])})
        return out

    return [{"id": action_id,
             "features": [{"name": INTERCEPT, "value": 1.0, "score": w0},
                          *terms(context, context_effects[i]),
                          *terms(named, action_effects[i])]}
            for i, (action_id, named) in enumerate(actions)]


#: noisyloop's request fields as Personalizer names them (errors name the latter).
_FIELD_NAMES = (("features", "contextFeatures"), ("event_id", "eventId"),
                ("defer", "deferActivation"))
#: Statuses of noisyloop's errors as Personalizer answers them.
_STATUS = {422: 400}


def _target(field: str | None) -> str | None:
    if field is None:
        return None
    for native, name in _FIELD_NAMES:
        if field == native or field.startswith(f"{native}.") or field.startswith(f"{native}["):
            return name + field[len(native):]
    return field


def error_response(exc: ApiError) -> OrjsonResponse:
    """An error in Personalizer's shape, ``{"error": {"code", "message", "target"}}`` (what
    both SDKs read into their exceptions), the code in Personalizer's PascalCase."""
    code = re.sub(r"(?:^|_)([a-z])", lambda m: m.group(1).upper(), exc.code)
    target = _target(exc.field)
    message = exc.message if target is None else f"{target}: {exc.message}"
    error: dict[str, Any] = {"code": code, "message": message}
    if target is not None:
        error["target"] = target
    return OrjsonResponse({"error": error}, status_code=_STATUS.get(exc.status, exc.status),
                          headers=exc.headers)


def unknown_call(path: str) -> ApiError:
    """The 404 of a path under ``.../personalizer`` that names no Personalizer call (every
    call of both SDKs has its own route)."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["v1.0"]:
        parts = parts[1:]
    return ApiError(404, "not_found", f"no Personalizer call at {'/'.join(parts)!r}")
