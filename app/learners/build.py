"""Learners built from stored model configs: shared by the API and the workers.

A model's config (:class:`~app.learners.config.ModelConfig`) names the task, the
algorithm, the sizes, the hyper-parameters and the seed; :func:`build_learner` turns it
(plus a snapshot's arrays and the model's current noise rates) into a ready
learner.  Pure numpy: no Redis, no HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from app.learners.base import Batch, Learner, batch_size
from app.learners.budget import LabelBudget, make_budget
from app.learners.config import BudgetSettings, ModelConfig
from app.learners.offpolicy import learn_finite
from app.learners.registry import build

#: Per-slot ``(alpha_k, beta_k)`` of the trust-bias click model (:mod:`app.learners.noise_slots`).
SlotAffine = tuple[tuple[float, ...], tuple[float, ...]]


def build_learner(config: ModelConfig, state: Mapping[str, np.ndarray] | None = None,
                  noise: tuple[float, float] | None = None,
                  version: int | None = None, *, noise_reliable: bool = True,
                  slot_noise: SlotAffine | None = None) -> Learner:
    """A learner for ``config``, with ``state`` loaded and ``noise`` rates applied.

    ``version`` (the snapshot's) is given where the learner will *decide*: see
    :func:`decision_seed`.  ``noise_reliable`` and ``slot_noise``: see
    :func:`apply_noise_rates`.
    """
    seed = config.seed
    if version is not None:
        seed = decision_seed(seed, version)
    learner = build(config.task, config.algorithm, config.n_features, config.n_classes,
                    config.params, seed=seed)
    if state is not None:
        learner.set_state(state)
    if noise is not None:
        apply_noise_rates(learner, *noise, reliable=noise_reliable, slot_noise=slot_noise)
    return learner


#: Most events a drift recovery relearns (the newest, when the change is estimated further back).
MAX_REFIT_EVENTS = 50_000


def refit(config: ModelConfig, batch: Batch, rates: tuple[float, float]) -> Learner:
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


def budget_strategy(label_budget: BudgetSettings, seed: int | None,
                    state: Mapping[str, np.ndarray] | None = None) -> LabelBudget:
    """The label-budget strategy of a regression model's ``label_budget`` config.

    ``seed`` feeds the per-round coins (same seed and state: same answers in
    every process); raises :class:`~app.learners.base.ParamError` for invalid settings.
    """
    strategy = make_budget(label_budget.strategy, label_budget.budget, a=label_budget.a,
                           horizon=label_budget.horizon, seed=seed)
    if state is not None:
        strategy.set_state(state)
    return strategy
