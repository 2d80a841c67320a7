"""Learners built from stored model configs: shared by the API and the workers.

A stored config (see :mod:`app.store.models`) names the task, the algorithm,
the sizes, the hyper-parameters and the seed; :func:`build_learner` turns it
(plus a snapshot's arrays and the model's current noise rates) into a ready
learner.  Pure numpy: no Redis, no HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from app.learners.base import Batch, Learner, batch_size
from app.learners.budget import LabelBudget, make_budget
from app.learners.offpolicy import learn_finite
from app.learners.registry import build, learner_class

#: Per-slot ``(alpha_k, beta_k)`` of the trust-bias click model (:mod:`app.learners.noise_slots`).
SlotAffine = tuple[tuple[float, ...], tuple[float, ...]]


def build_learner(config: Mapping[str, Any], state: Mapping[str, np.ndarray] | None = None,
                  noise: tuple[float, float] | None = None,
                  version: int | None = None, *, noise_reliable: bool = True,
                  slot_noise: SlotAffine | None = None) -> Learner:
    """A learner for ``config``, with ``state`` loaded and ``noise`` rates applied.

    ``version`` (the snapshot's) is given where the learner will *decide*: see
    :func:`decision_seed`.  ``noise_reliable`` and ``slot_noise``: see
    :func:`apply_noise_rates`.
    """
    seed = config.get("seed")
    if version is not None:
        seed = decision_seed(seed, version)
    learner = build(config["task"], config["algorithm"], config["n_features"],
                    config.get("n_classes"), config.get("params") or {}, seed=seed)
    if state is not None:
        learner.set_state(state)
    if noise is not None:
        apply_noise_rates(learner, *noise, reliable=noise_reliable, slot_noise=slot_noise)
    return learner


#: Most events a drift recovery relearns (the newest, when the change is estimated further back).
MAX_REFIT_EVENTS = 50_000


def refit(config: Mapping[str, Any], batch: Batch, rates: tuple[float, float]) -> Learner:
    """A fresh learner for ``config`` with the noise ``rates`` that learned ``batch`` in
    order: what a drift recovery publishes (the model refitted on the events since the
    estimated change; ``workers.recovery``, and the in-process runs of the same step)."""
    learner = build_learner(config)
    apply_noise_rates(learner, *rates)
    if batch_size(batch):
        learn_finite(learner, batch)
    return learner


def decision_seed(seed: int | None, version: int) -> int | None:
    """Seed of the learner that decides at snapshot ``version`` of a seeded model.

    The API rebuilds its learner at every new version; seeding each with the
    model's own seed would restart the same exploration draws after every
    trainer update (draws correlated across rounds).  Mixing in the version
    keeps a seeded model reproducible while each version draws afresh.  An
    unseeded model stays unseeded (fresh entropy per build).

    >>> decision_seed(7, 1) == decision_seed(7, 1) != decision_seed(7, 2)
    True
    >>> decision_seed(None, 3) is None
    True
    """
    if seed is None:
        return None
    return int(np.random.SeedSequence([int(seed), int(version)]).generate_state(1)[0])


def apply_noise_rates(learner: Learner, rho0: float, rho1: float,
                      reliable: bool = True, slot_noise: SlotAffine | None = None) -> None:
    """Hand the model's current noise rates to a noise-aware learner (no-op otherwise), and
    whether they are reliable (False: initial rates awaiting an estimate, so its calibrated
    rewards are flagged ``calibration_unreliable``); to a learner that logs placements also
    the published per-slot ``(alpha, beta)`` (None: the rates apply)."""
    if learner.uses_noise_rates:
        learner.set_noise_rates(rho0, rho1)
        learner.set_noise_reliability(reliable)
    if learner.logs_placements:
        learner.set_slot_noise(slot_noise)


def initial_noise_rates(params: Mapping[str, Any]) -> tuple[float, float]:
    """The rates a new model starts from: its ``rho0``/``rho1`` params, else 0."""
    return float(params.get("rho0", 0.0) or 0.0), float(params.get("rho1", 0.0) or 0.0)


def takes_clicks(learner_or_cls: Learner | type[Learner]) -> bool:
    """Whether feedback is a (noisy) click rather than a full-information label."""
    return "click" in learner_or_cls.feedback_fields


def keeps_anchors(config: Mapping[str, Any]) -> bool:
    """Whether the model ``config``'s learner uses noise rates and learns from one click per
    played label (so the trainer scores its plays for the anchor estimator)."""
    cls = learner_class(config["task"], config["algorithm"])
    return takes_clicks(cls) and cls.takes_noise_rates(config.get("params") or {})


def logs_placements(config: Mapping[str, Any]) -> bool:
    """Whether the model ``config``'s learner logs its placements per slot, so the anchor
    estimator is the per-slot one (:mod:`app.learners.noise_slots`)."""
    return learner_class(config["task"], config["algorithm"]).logs_placements


def estimates_anchors(config: Mapping[str, Any]) -> bool:
    """Whether the anchor estimator can serve the model ``config``: its plays are scored
    (:func:`keeps_anchors`) or it logs its placements (:func:`logs_placements`)."""
    return keeps_anchors(config) or logs_placements(config)


def default_estimator(config: Mapping[str, Any]) -> str:
    """The noise estimator of the model ``config`` until one is chosen: ``anchor`` when it
    can serve it (:func:`estimates_anchors`), else ``fixed`` (its rates are the ones given:
    nothing else can estimate them)."""
    return "anchor" if estimates_anchors(config) else "fixed"


def usable_estimators(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The estimators that can serve the model ``config``: ``anchor`` when
    :func:`estimates_anchors`, ``nrest`` when its learner keeps NREst samples, and ``fixed``
    (the rates given) always.

    >>> usable_estimators({"task": "rank", "algorithm": "ridge_pl", "params": {}})
    ('anchor', 'fixed')
    """
    nrest = learner_class(config["task"], config["algorithm"]).keeps_noise_samples
    return (*(("anchor",) if estimates_anchors(config) else ()),
            *(("nrest",) if nrest else ()), "fixed")


def estimates_over(config: Mapping[str, Any], source: str) -> bool:
    """Whether an estimate may replace the model ``config``'s rates from ``source``: not
    rates configured by hand, unless the estimate is part of the algorithm."""
    cls = learner_class(config["task"], config["algorithm"])
    return cls.owns_noise_estimate or source != "configured"


def timeout_feedback(config: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
    """Feedback fields of an unanswered decision of the model ``config`` under
    ``on_timeout: "no_click"`` (None: its learner takes no clicks)."""
    cls = learner_class(config["task"], config["algorithm"])
    return cls.no_click_feedback(config.get("params") or {})


def budget_strategy(label_budget: Mapping[str, Any], seed: int | None,
                    state: Mapping[str, np.ndarray] | None = None) -> LabelBudget:
    """The label-budget strategy of a regression model's ``label_budget`` config.

    ``seed`` feeds the per-round coins (same seed and state: same answers in
    every process); raises :class:`~app.learners.base.ParamError` for invalid settings.
    """
    strategy = make_budget(label_budget["strategy"], label_budget["budget"],
                           a=label_budget.get("a", 1.0), horizon=label_budget.get("horizon"),
                           seed=seed)
    if state is not None:
        strategy.set_state(state)
    return strategy


def budget_seed(config: Mapping[str, Any]) -> int:
    """Seed of a model's label-budget coins: its ``seed``, else derived from its ``uid``."""
    seed = config.get("seed")
    return int(seed) if seed is not None else int(str(config.get("uid") or "0"), 16)
