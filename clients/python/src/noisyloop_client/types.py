"""Shapes of the service's JSON answers (``api.md``), as ``TypedDict`` for type checkers.

The client returns the decoded JSON as is (no per-field conversion, so
batches stay cheap); these types name the fields the contract guarantees.
The service may add fields, hence ``total=False`` where the contract lists
optional ones.
"""

from __future__ import annotations

from typing import Any, TypedDict

#: Features in one of the three forms of ``api.md``: dense list (or numpy
#: vector), ``{"indices", "values"}`` or ``{"named": {...}}``.
Features = Any


class TenantCreated(TypedDict):
    tenant_id: str
    api_key: str
    key_id: str


class KeyCreated(TypedDict):
    api_key: str
    key_id: str


class TenantInfo(TypedDict):
    tenant_id: str
    n_models: int
    created_at: str


class TrainerError(TypedDict):
    error: str
    since: str
    failed_steps: int


class ModelStats(TypedDict):
    predictions: int
    feedback_accepted: int
    events_applied: int
    events_expired: int
    events_dead_lettered: int
    dead_letters_dropped: int
    awaiting_feedback: int
    backlog: int
    debiased_reward: float | None
    calibration_unreliable: bool
    trainer_error: TrainerError | None


class Noise(TypedDict, total=False):
    rho0: float
    rho1: float
    source: str
    estimated_at: str | None
    n_samples: int
    history: list[dict[str, Any]]
    estimator: str
    interval: dict[str, Any] | None
    one_right_label: bool | None


class Model(TypedDict, total=False):
    model_id: str
    task: str
    algorithm: str
    n_features: int
    n_classes: int | None
    params: dict[str, Any]
    feedback: dict[str, Any]
    created_at: str
    version: int
    stats: ModelStats
    noise: Noise | None
    position_bias: PositionBias | None
    mode: str
    apprentice: dict[str, Any] | None
    drift: dict[str, Any]


class LabelBudget(TypedDict):
    """A regression model's label budget and how much of it was spent."""

    budget: float
    strategy: str
    rounds: int
    labels_used: int
    a: float | None


class PositionBias(TypedDict):
    """Examination probability per slot relative to slot 0 (rank models) and its source."""

    values: list[float]
    source: str


class RankedAction(TypedDict):
    """The candidate placed in one slot, with the probability of that placement."""

    id: str
    slot: int
    probability: float
    expected_reward: float


class Ranking(TypedDict, total=False):
    """One ranking (``event_id`` absent with ``explore=False``)."""

    event_id: str
    model_version: int
    ranking: list[RankedAction]
    calibration_unreliable: bool


class ArrayPayload(TypedDict):
    dtype: str
    shape: list[int]
    data_b64: str


class Snapshot(TypedDict):
    model: dict[str, Any]
    version: int
    state: dict[str, ArrayPayload]


class Prediction(TypedDict, total=False):
    """One decision; which fields are present depends on the task."""

    event_id: str
    label: int
    labels: list[int]
    probability: float
    greedy_label: int
    greedy_labels: list[int]
    expected_reward: float
    value: float
    model_version: int


class Rejected(TypedDict):
    index: int
    error: dict[str, Any]


class FeedbackBatchResult(TypedDict):
    accepted: int
    rejected: list[Rejected]


class SyncResult(TypedDict):
    version: int
    pending: int
    dead_lettered: int


class KeptVersion(TypedDict):
    """A kept version to roll back to (``reason``: ``trainer`` or the change that made it)."""

    version: int
    created_at: str | None
    events_applied: int
    current: bool
    reason: str


class Versions(TypedDict):
    """The model's version now and its kept versions, newest first."""

    version: int
    versions: list[KeptVersion]
    next_before: int | None


class Rollback(TypedDict):
    version: int
    rolled_back_to: int


class Series(TypedDict):
    """A model's quality series, oldest first: each point a dict with ``t``,
    ``events_applied``, ``online_reward``, ``calibrated_reward``, ``rho0``, ``rho1`` and
    the other fields docs/api.md lists."""

    points: list[dict[str, Any]]
    next_before: float | None


class ValueInterval(TypedDict):
    """An estimate with its 95% interval (None before enough events)."""

    estimate: float | None
    ci_low: float | None
    ci_high: float | None


class ChampionValue(TypedDict):
    algorithm: str
    params: dict[str, Any]
    events: int
    value: ValueInterval


class ChallengerInfo(TypedDict):
    """A challenger: ``status`` ``waiting``, ``following`` or ``failed`` (``error``)."""

    name: str
    algorithm: str
    params: dict[str, Any]
    created_at: str
    status: str
    error: str | None
    events: int
    value: ValueInterval
    ips: ValueInterval
    vs_champion: ValueInterval


class Challengers(TypedDict):
    champion: ChampionValue
    challengers: list[ChallengerInfo]
    max_challengers: int
    level: float
    calibration_unreliable: bool
    reason: str | None


class Promoted(TypedDict):
    version: int
    algorithm: str
    params: dict[str, Any]
    previous_as: str | None


class DeadLetter(TypedDict):
    """An event the trainer could not apply (``entry_id`` is what drop and retry take)."""

    entry_id: str
    stream_id: str
    event_id: str | None
    kind: str | None
    reason: str
    deliveries: int
    dead_lettered_at: str
    fields: dict[str, list[int]] | None
    feedback: dict[str, Any] | None


class DeadLetterPage(TypedDict):
    dead_letters: list[DeadLetter]
    total: int
    next_after: str | None


class DeadLetterRetried(TypedDict):
    entry_id: str
    stream_id: str


class Confusion(TypedDict, total=False):
    matrix: list[list[float]]
    source: str
    n_gold: int
