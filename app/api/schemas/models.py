"""Schemas of the model routes (create, read, snapshot export/import, sync)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from app.api.presets import PRESETS, with_preset
from app.api.schemas.common import (
    INTEGRAL,
    MAX_CLASSES,
    MAX_FEATURES,
    JsonInt,
    ModelId,
    RequestModel,
)
from app.api.schemas.serving import MODE_DESCRIPTION, ApprenticeReport, Mode
from app.features import DEFAULT_MAX_FEATURE_NORM, MAX_FEATURE_NORM_LIMIT
from app.learners.registry import ALGORITHMS
from app.store.drift import DEFAULT_DRIFT_ACTION, DriftAction
from app.store.versions import DEFAULT_INTERVAL_SECONDS, DEFAULT_KEPT
from app.tasks import TASKS

#: Largest seed, horizon or version a request may carry: the largest integer every JSON
#: reader keeps exact (I-JSON, RFC 7493).  Bounds near 2^63 read as doubles round to
#: 2^63, so a client would take an integer the service refuses for valid.
MAX_JSON_INT = 2**53 - 1
#: Longest wait for feedback: 30 days.
MAX_WAIT_SECONDS = 30 * 86400


class FeedbackPolicy(RequestModel):
    """How long a decision waits for feedback and what an unanswered one becomes."""

    wait_seconds: JsonInt = Field(default=86400, ge=1, le=MAX_WAIT_SECONDS)
    on_timeout: Literal["drop", "no_click"] = "drop"
    aggregation: Literal["earliest", "sum"] = Field(
        default="earliest", description="`earliest`: the first feedback of a decision counts, "
        "a later one is refused as a duplicate; `sum` (`rank` models): each feedback is added "
        "up until `wait_seconds` passed, and the sum is learned once then")


class LabelBudgetConfig(RequestModel):
    """Label budget of a ``regression`` model (Moroshko & Crammer section 4.2).

    ``budget`` is the average number of noisy labels per round the service
    may ask for (one round = one event's first label).  When the strategy
    wants ``k`` more for an event, the feedback response says
    ``more_labels: k``; the service never asks for more than the budget allows.
    """

    budget: float = Field(ge=1, le=1000, allow_inf_nan=False)
    strategy: Literal["const", "begin", "auto", "auto_self_tuned"] = "auto_self_tuned"
    a: float = Field(default=1.0, gt=0, allow_inf_nan=False,
                     description="`auto` only: stay with one label w.p. a/(a + (y - yhat)^2)")
    horizon: Annotated[int, Field(strict=True, ge=1, le=MAX_JSON_INT), INTEGRAL] | None = Field(
        default=None, description="`begin` only: number of rounds n")


#: Most versions a model may keep (each is a copy of its state in Redis).
MAX_KEPT = 100
#: Longest interval between two versions the trainer keeps: one day.
MAX_INTERVAL_SECONDS = 86_400.0


class VersionsConfig(RequestModel):
    """Which published versions a model keeps to roll back to.

    The trainer publishes a version after every batch; it keeps one at most
    every ``interval_seconds``.  Creating, resetting, importing a snapshot,
    rolling back and promoting always keep theirs.  Only the newest ``kept``
    are held (0: none), each a copy of the model's state: ``kept`` times its
    state size in Redis.
    """

    kept: Annotated[int, Field(strict=True, ge=0, le=MAX_KEPT), INTEGRAL] = DEFAULT_KEPT
    interval_seconds: float = Field(default=DEFAULT_INTERVAL_SECONDS, ge=0,
                                    le=MAX_INTERVAL_SECONDS, allow_inf_nan=False)


class DriftSettings(RequestModel):
    """What a detection of the model's drift detector (a fall of its reward) does.

    ``none``: the model is not watched.  ``alert``: the detection is shown in
    ``drift``, counted (``noisyloop_drift_detections_total``, the alert
    ``NoisyloopDriftDetected``) and marked in the decision log.  ``recover``:
    as ``alert``, and the trainer refits the model on the events of its
    decision log since the estimated change, published as a new version
    (kept, marked ``drift_recovery`` in the log; a rollback undoes it).
    """

    action: DriftAction = Field(default=DEFAULT_DRIFT_ACTION)


class ModelCreateRequest(RequestModel):
    """Body of ``POST /v1/models``; ``algorithm`` defaults to the task's first; a ``preset``
    fills the fields the body leaves out (:mod:`app.api.presets`)."""

    model_id: ModelId
    task: str = Field(json_schema_extra={"enum": list[JsonValue](TASKS)},
                      description="one of the served tasks")
    algorithm: Annotated[str, Field(json_schema_extra={
        "enum": list[JsonValue](sorted({a for t, a in ALGORITHMS if t in TASKS}))})] | None = Field(
        default=None, description="one of the task's algorithms (docs/api.md lists which fits "
                                  "which task); omitted or null: the task's default")
    n_features: JsonInt = Field(ge=1, le=MAX_FEATURES)
    n_classes: Annotated[int, Field(strict=True, ge=2, le=MAX_CLASSES), INTEGRAL] | None = None
    n_action_features: Annotated[int, Field(strict=True, ge=1, le=MAX_FEATURES), INTEGRAL] | (
        None) = Field(default=None, description="rank: features of each candidate action")
    slots: Annotated[int, Field(strict=True, ge=1, le=100), INTEGRAL] | None = Field(
        default=None, description="rank: slots a ranking fills at most")
    params: dict[str, Any] = Field(default_factory=dict, max_length=64)
    feedback: FeedbackPolicy = Field(default_factory=FeedbackPolicy)
    seed: Annotated[int, Field(strict=True, ge=0, le=MAX_JSON_INT), INTEGRAL] | None = None
    label_budget: LabelBudgetConfig | None = Field(
        default=None, description="regression only: ask for extra noisy labels within a budget")
    max_feature_norm: float = Field(
        default=DEFAULT_MAX_FEATURE_NORM, gt=0, le=MAX_FEATURE_NORM_LIMIT, allow_inf_nan=False,
        description="Largest Euclidean norm of an input (predict features, noisy_label example "
                    "features, noisy_input copies); a larger one is refused with 422 "
                    "invalid_features, so that no single event can swamp the weights")
    mode: Mode = Field(default="online", description=MODE_DESCRIPTION)
    versions: VersionsConfig = Field(
        default_factory=VersionsConfig,
        description="which published versions are kept to roll back to (GET .../versions)")
    drift: DriftSettings = Field(
        default_factory=DriftSettings,
        description="what a detected drift does (PUT .../drift changes it)")
    preset: Literal[tuple(PRESETS)] | None = Field(  # type: ignore[valid-type]
        default=None, description="a named set of defaults the model starts from: "
        + "; ".join(f"{name}: {p.description}" for name, p in PRESETS.items()))

    @model_validator(mode="before")
    @classmethod
    def _fill_preset(cls, data: Any) -> Any:
        return with_preset(data)


class TrainerError(BaseModel):
    """The trainer's failure on a model."""

    error: str = Field(description="The last failed step's exception (type: message).")
    since: str = Field(description="When the failures began (UTC, ISO 8601).")
    failed_steps: int = Field(ge=0, description="Failed steps since then.")


class ModelStats(BaseModel):
    """Counters of a model."""

    predictions: int
    feedback_accepted: int
    events_applied: int
    events_expired: int
    events_dead_lettered: int = Field(
        description="Events the trainer could not apply, held as dead letters now "
                    "(GET .../dead-letters lists them; drop or retry takes them off).")
    dead_letters_dropped: int = Field(
        description="Dead letters removed without being applied: dropped by the owner, or the "
                    "oldest beyond 10,000 per model.")
    debiased_reward: float | None = Field(
        description="Mean observed click over applied events corrected for click noise with "
                    "the model's current rates, (mean f - rho0) / (1 - rho0 - rho1), clipped "
                    "to [0, 1] (an estimate of the true click rate); null before any event.")
    awaiting_feedback: int = Field(
        default=0, description="Decisions served (and logged) whose feedback has not come, nor "
                               "expired, at the time of the answer.")
    backlog: int = Field(
        default=0, description="Feedback accepted and not applied yet by the trainer, at the "
                               "time of the answer (what POST .../sync waits for; 0 once it "
                               "returns, unless more came).")
    calibration_unreliable: bool = Field(
        default=False,
        description="debiased_reward rests (or, before the first event, would rest) on "
                    "rates that still await an estimate or whose estimate a later refresh "
                    "withdrew (noise status insufficient_data) or on 1 - rho0 - rho1 below "
                    "0.2.")
    trainer_error: TrainerError | None = Field(
        default=None,
        description="Why the trainer's steps on this model fail (null: its last step "
                    "succeeded). Its events stay queued, none is lost, and the step is retried "
                    "(after 1 s, doubling up to 30 s); other models are not held up.")


class NoiseResponse(BaseModel):
    """Current click-noise rates of a model."""

    rho0: float
    rho1: float
    source: Literal["initial", "configured", "estimated"]
    estimated_at: str | None = None
    n_samples: int = 0
    history: list[dict[str, Any]] = Field(default_factory=list)


class PositionBiasResponse(BaseModel):
    """Examination probability per slot relative to slot 0 (rank models)."""

    values: list[float]
    source: Literal["configured", "estimated", "insufficient_data"] = Field(
        description="estimated: theta of the published per-slot estimate (GET .../noise "
                    "slots); configured: the position_bias param, while none is published; "
                    "insufficient_data: neither (every value the prior 1)")
    calibration_unreliable: bool = Field(
        default=False, description="true when the source is insufficient_data: the values are "
                                   "the prior, not an estimate")


class DriftDetection(BaseModel):
    """One detection (also a ``drift`` marker in the decision log)."""

    time: float = Field(description="Unix time")
    event: int = Field(description="the detector's event count at the alarm")
    since: int = Field(description="events from the estimated change to the alarm")
    action: DriftAction = Field(description="the model's drift.action then")
    recovered_version: int | None = Field(
        default=None, description="recover: the model's version after the recovery (the "
                                  "version of the batch when the recovery was dropped)")


class DriftResponse(BaseModel):
    """What the model's drift detector reports (a Page-Hinkley test on its reward)."""

    action: DriftAction = Field(description="what a detection does (the model's setting)")
    status: Literal["off", "warming_up", "stable", "drift"] = Field(
        description="drift: a fall of the reward was detected within the last 10,000 "
                    "events; warming_up: the detector still estimates the reward's mean and "
                    "spread (100 events after a start, a detection, or a reset, rollback, "
                    "import or promotion of the model); off: action none")
    detections: int = Field(description="detections over the model's life")
    detected_at: float | None = Field(
        description="Unix time of the last detection since the model last changed by a "
                    "reset, rollback, import or promotion (null: none)")
    detected_at_event: int | None = Field(
        description="the detector's event count at that detection (null: none)")
    events: int = Field(description="events the detector has seen")
    signal: str = Field(description="what is watched: reward, the observed click per event")
    method: str = Field(description="the test: page_hinkley (a fall of the mean)")
    statistic: float = Field(description="Page-Hinkley statistic now, in standard deviations")
    threshold: float = Field(description="the statistic's alarm level")
    delta: float = Field(description="smallest fall counted, in standard deviations")
    history: list[DriftDetection] = Field(
        default_factory=list, description="the newest 20 detections, oldest first")


class ModelResponse(BaseModel):
    """A stored model with its version and stats."""

    model_id: str
    task: str
    algorithm: str
    preset: str | None = Field(default=None, description="the preset the model started from")
    n_features: int
    n_classes: int | None
    params: dict[str, Any]
    feedback: FeedbackPolicy
    seed: int | None = None
    created_at: str
    version: int
    updated_at: str | None = None
    stats: ModelStats
    noise: NoiseResponse | None = None
    label_budget: LabelBudgetConfig | None = None
    max_feature_norm: float = DEFAULT_MAX_FEATURE_NORM
    position_bias: PositionBiasResponse | None = None
    mode: Mode = "online"
    apprentice: ApprenticeReport | None = Field(
        default=None, description="in apprentice mode, or after it: agreement with the "
                                  "baselines served and the rewards observed")
    versions: VersionsConfig = Field(default_factory=VersionsConfig)
    evaluation_policies: list[str] = Field(
        default_factory=list,
        description="the policies POST .../evaluations takes for this model: uniform, "
                    "logging, fixed:N (any label N), model, model:greedy, configuration "
                    "({algorithm, params}); empty: its decision log is not evaluated")
    drift: DriftResponse | None = Field(
        default=None, description="the drift setting and the detector's report (in the "
                                  "answers about one model; null in a list)")


class ModelListResponse(BaseModel):
    """Every model of the caller's tenant."""

    models: list[ModelResponse]


#: Standard base64 (what ``GET .../snapshot`` writes).
BASE64_PATTERN = r"^[A-Za-z0-9+/]*={0,2}$"


class ArrayPayload(BaseModel):
    """One array: base64 of its ``.npy`` bytes, with dtype and shape for reading."""

    model_config = ConfigDict(strict=True)

    dtype: str = Field(max_length=32)
    shape: list[Annotated[int, Field(strict=True, ge=0), INTEGRAL]] = Field(max_length=32)
    data_b64: str = Field(pattern=BASE64_PATTERN)


class ModelConfigPayload(BaseModel):
    """The config part of a snapshot."""

    model_config = ConfigDict(strict=True)

    model_id: str
    task: str
    algorithm: str
    n_features: JsonInt
    n_classes: JsonInt | None
    params: dict[str, Any]


class SnapshotResponse(BaseModel):
    """``GET /v1/models/{id}/snapshot``."""

    model: ModelConfigPayload
    version: int
    state: dict[str, ArrayPayload]


class SnapshotImportRequest(BaseModel):
    """``PUT /v1/models/{id}/snapshot``: the state arrays; ``model`` must match the config.

    Which arrays ``state`` holds, and their shapes, depend on the model's
    algorithm and sizes: import what ``GET .../snapshot`` of the same kind of
    model exported.
    """

    model_config = ConfigDict(strict=True)

    model: ModelConfigPayload | None = None
    version: Annotated[int, Field(strict=True, ge=0, le=MAX_JSON_INT), INTEGRAL] | None = None
    state: dict[str, ArrayPayload] = Field(min_length=1, max_length=64)


class SyncResponse(BaseModel):
    """The trainer has handled every event accepted before the call: each is applied or a
    dead letter."""

    version: int
    pending: int = Field(
        ge=0, description="Accepted events that are not applied: the dead letters held now "
                          "(0: every accepted event is applied, expired or dropped by you).")
    dead_lettered: int = Field(
        ge=0, description="Dead letters held now (GET .../dead-letters); equals `pending`.")
