"""A model's config, typed: what a model is and what its learner can do.

A model's config names the task, the algorithm, the sizes, the hyper-parameters
and the seed, with the service settings of the model (feedback policy, label
budget, mode, kept versions, drift action).  It is stored as one JSON document
(:mod:`app.store.models`); :class:`ModelConfig` is that document validated once,
where a model is created or its config is read from the store.  The rest of the
service reads attributes, never keys: the learner class, and the questions the
workers and the API ask of a model (does it keep anchors, which noise
estimators can serve it, ...), which the learner class declares.

A config is frozen; a change makes a new validated config (:meth:`ModelConfig.updated`).
:meth:`ModelConfig.as_dict` gives back exactly the keys the document holds, in
its order (a key absent from the stored JSON stays absent, unknown keys are
kept; a section's keys come in their declared order, the order the API writes
them), so a config read and written again is the same JSON.  A stored document
is validated once per distinct text (:meth:`ModelConfig.from_json`): reading a
model's config on every request costs less than parsing its JSON did
(``bench/bench_model_config.py``).  Pure: no Redis, no HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property, lru_cache
from typing import Any

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, PrivateAttr

from app.learners.base import Learner
from app.learners.registry import learner_class

#: A decision's feedback wait when a config names none (the API's default).
DEFAULT_WAIT_SECONDS = 86400


class _Section(BaseModel):
    """A nested part of the config document (frozen; unknown keys are kept)."""

    model_config = ConfigDict(frozen=True, extra="allow")


class FeedbackSettings(_Section):
    """How long a decision waits for feedback, and what an unanswered one teaches."""

    wait_seconds: int = DEFAULT_WAIT_SECONDS
    on_timeout: str = "drop"
    aggregation: str = "earliest"
    """``earliest``: the first feedback joins at once; ``sum``: the feedback of a decision
    is added up until its deadline, then joined (:mod:`app.api.openfeedback`)."""


class BudgetSettings(_Section):
    """A regression model's label budget (:func:`app.learners.build.budget_strategy`)."""

    budget: float
    strategy: str = "auto_self_tuned"
    a: float = 1.0
    horizon: int | None = None


class VersionsSettings(_Section):
    """Which published versions are kept (None: the store's default,
    :class:`app.store.versions.VersionPolicy`)."""

    kept: int | None = None
    interval_seconds: float | None = None


class DriftSettings(_Section):
    """What a detected drift does (None: the store's default,
    :class:`app.store.drift.DriftPolicy`)."""

    action: str | None = None


def takes_clicks(learner_or_cls: Learner | type[Learner]) -> bool:
    """Whether feedback is a (noisy) click rather than a full-information label."""
    return "click" in learner_or_cls.feedback_fields


class ModelConfig(BaseModel):
    """A stored model config, validated.

    A config read from the store is written back with the keys its document
    holds, in their order (:meth:`as_dict`); fields are declared in the order a
    new model's document lists them.

    >>> c = ModelConfig.of({"model_id": "m", "task": "rank", "algorithm": "ridge_pl",
    ...                     "n_features": 3, "params": {}})
    >>> c.learner_class.__name__, c.usable_estimators, c.mode
    ('RidgeRanker', ('anchor', 'fixed'), 'online')
    >>> c.updated(mode="apprentice").as_dict()["mode"], "mode" in c.as_dict()
    ('apprentice', False)
    """

    model_config = ConfigDict(frozen=True, extra="allow")
    _keys: tuple[str, ...] = PrivateAttr(default=())
    """The document's keys in the order it held them (:meth:`as_dict`)."""

    model_id: str
    task: str
    algorithm: str
    n_features: int
    n_classes: int | None = None
    params: dict[str, Any] = {}
    feedback: FeedbackSettings = FeedbackSettings()
    seed: int | None = None
    uid: str | None = None
    preset: str | None = None
    label_budget: BudgetSettings | None = None
    max_feature_norm: float | None = None
    mode: str = "online"
    versions: VersionsSettings = VersionsSettings()
    drift: DriftSettings = DriftSettings()
    created_at: str | None = None
    explain_scores: bool = False
    """Whether a Personalizer rank explains its scores (``isInferenceExplainabilityEnabled``)."""
    auto_optimize_seconds: int | None = None
    """Every how many seconds a Personalizer loop evaluates other exploration settings and
    switches to a clearly better one (``isAutoOptimizationEnabled``; None: never)."""

    # -- the document ----------------------------------------------------------------------

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> ModelConfig:
        """The config a JSON document (a mapping) holds, validated."""
        config = cls.model_validate(document)
        config._keys = tuple(document)
        return config

    @classmethod
    def from_json(cls, raw: bytes) -> ModelConfig:
        """The config a stored JSON document holds, validated (the same document read again
        gives the same config, validated once: :func:`_stored`)."""
        return _stored(bytes(raw))

    @classmethod
    def of_learner(cls, task: str, algorithm: str, params: Mapping[str, Any]) -> ModelConfig:
        """The config of a model of ``algorithm`` for ``task`` with ``params``, unnamed and
        unsized: for the learner's questions (:attr:`usable_estimators`, ...) where no model
        is stored (a replay picking the service's defaults)."""
        return cls(model_id="", task=task, algorithm=algorithm, n_features=1,
                   params=dict(params))

    def as_dict(self) -> dict[str, Any]:
        """The JSON document: the keys it was read or built with (defaults left out), in the
        order it held them (keys set since come after, as a dict update places them)."""
        dumped = self.model_dump(mode="json", exclude_unset=True)
        first = {key: dumped[key] for key in self._keys if key in dumped}
        return first if len(first) == len(dumped) else {**first, **dumped}

    def to_json(self) -> bytes:
        """The JSON document as stored."""
        return orjson.dumps(self.as_dict())

    def updated(self, **changes: Any) -> ModelConfig:
        """A new validated config: this one with ``changes`` (field name -> value; a section
        may be given as a mapping)."""
        return type(self).of({**self.as_dict(), **changes})

    @property
    def learns(self) -> bool:
        """Whether accepted feedback changes the learner's weights: not in ``logging`` mode,
        where the trainer joins, logs and counts the events but keeps the weights."""
        return self.mode != "logging"

    @property
    def class_count(self) -> int:
        """``n_classes`` of a model whose task has classes (a ValueError for one without)."""
        if self.n_classes is None:
            raise ValueError(f"model {self.model_id!r} has no n_classes")
        return self.n_classes

    # -- the learner and what it declares ---------------------------------------------------

    @cached_property
    def learner_class(self) -> type[Learner]:
        """The class implementing the config's algorithm for its task."""
        return learner_class(self.task, self.algorithm)

    @property
    def takes_clicks(self) -> bool:
        """Whether the learner's feedback is a (noisy) click rather than a label."""
        return takes_clicks(self.learner_class)

    @property
    def keeps_anchors(self) -> bool:
        """Whether the learner uses noise rates and learns from one click per played label
        (so the trainer scores its plays for the anchor estimator)."""
        cls = self.learner_class
        return takes_clicks(cls) and cls.takes_noise_rates(self.params)

    @property
    def logs_placements(self) -> bool:
        """Whether the learner logs its placements per slot, so the anchor estimator is the
        per-slot one (:mod:`app.learners.noise_slots`)."""
        return self.learner_class.logs_placements

    @property
    def estimates_anchors(self) -> bool:
        """Whether the anchor estimator can serve the model: its plays are scored
        (:attr:`keeps_anchors`) or it logs its placements (:attr:`logs_placements`)."""
        return self.keeps_anchors or self.logs_placements

    def one_right_label(self, stated: bool | None) -> bool | None:
        """Whether the model's anchor estimate may take every input to have exactly one
        right label: as its owner ``stated`` (None: said nothing), else as its learner's
        setting declares (:attr:`~app.learners.base.Learner.one_right_label`); None when
        its estimate does not rest on that (no scored plays, or the per-slot estimate).

        >>> ridge = ModelConfig.of_learner("label", "linucb_diag", {})
        >>> ridge.one_right_label(None), ridge.one_right_label(True)
        (False, True)
        >>> ModelConfig.of_learner("label", "rcnbf", {}).one_right_label(None)
        True
        >>> print(ModelConfig.of_learner("rank", "ridge_pl", {}).one_right_label(True))
        None
        """
        if not self.keeps_anchors or self.logs_placements:
            return None
        return self.learner_class.one_right_label if stated is None else stated

    @property
    def default_estimator(self) -> str:
        """The noise estimator until one is chosen: ``anchor`` when it can serve the model
        (:attr:`estimates_anchors`), else ``fixed`` (the rates given: nothing else can
        estimate them)."""
        return "anchor" if self.estimates_anchors else "fixed"

    @property
    def usable_estimators(self) -> tuple[str, ...]:
        """The estimators that can serve the model: ``anchor`` when
        :attr:`estimates_anchors`, ``nrest`` when its learner keeps NREst samples, and
        ``fixed`` (the rates given) always."""
        nrest = self.learner_class.keeps_noise_samples
        return (*(("anchor",) if self.estimates_anchors else ()),
                *(("nrest",) if nrest else ()), "fixed")

    def estimates_over(self, source: str) -> bool:
        """Whether an estimate may replace the model's rates from ``source``: not rates
        configured by hand, unless the estimate is part of the algorithm."""
        return self.learner_class.owns_noise_estimate or source != "configured"

    @property
    def timeout_feedback(self) -> dict[str, np.ndarray] | None:
        """Feedback fields of an unanswered decision under ``on_timeout: "no_click"`` (None:
        the learner takes no clicks)."""
        return self.learner_class.no_click_feedback(self.params)

    @property
    def initial_noise_rates(self) -> tuple[float, float]:
        """The rates a new model starts from: its ``rho0``/``rho1`` params, else 0."""
        return (float(self.params.get("rho0", 0.0) or 0.0),
                float(self.params.get("rho1", 0.0) or 0.0))

    @property
    def budget_seed(self) -> int:
        """Seed of the model's label-budget coins: its ``seed``, else derived from its
        ``uid``."""
        return int(self.seed) if self.seed is not None else int(self.uid or "0", 16)


#: Stored config documents whose validated config is kept (a model's config is read on
#: every request; it changes rarely).
STORED_CONFIGS = 4096


@lru_cache(maxsize=STORED_CONFIGS)
def _stored(raw: bytes) -> ModelConfig:
    """The config of a stored JSON document, validated once per distinct document (a config
    is frozen, so one instance serves every reader; its ``params`` are not to be mutated)."""
    return ModelConfig.of(orjson.loads(raw))
