"""The trainer's half of the anchor estimator: an out-of-sample score for every observed play.

For every model whose learner uses click-noise rates (the class's
:meth:`~app.learners.base.Learner.takes_noise_rates`) and logs the
propensity of its plays (``prob`` in the decision context), the trainer
scores each published batch's observed plays with the model's shadow
:class:`~app.learners.noise_anchor.ProgressiveScorer` (scored before it
learns them, in event order), then appends ``(prob, score, click)`` and the
scorer's state (:class:`app.store.nrest.AnchorStore`): a trainer hook
(:func:`after_publish`, :mod:`workers.hooks`).  The jobs role estimates the rates from these rows
(:mod:`workers.nrest`); no inputs are kept for it.

A learner that logs its placements (``logs_placements``: rank models) needs
no scorer: each shown slot is a row ``(placement probability, the score it was
placed with, click and slot packed by``
:func:`~app.learners.noise_publish.pack_slots` ``)`` (:func:`placement_rows`),
and the model keeps the newest :data:`~app.learners.noise_publish.SLOT_BUFFER`
(:func:`buffer_of`).

The scorer is the feature's state of the model (:class:`ScorerCache`, in its
slot, :mod:`workers.feature`) with the snapshot version it is in step with; a
cache that is not (another trainer applied batches) is reloaded from the store.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from app.learners.base import Batch
from app.learners.config import ModelConfig
from app.learners.noise_anchor import ProgressiveScorer
from app.learners.noise_publish import ANCHOR_BUFFER, SLOT_BUFFER, pack_slots
from app.store.keys import ModelKeys
from workers.context import ModelSlot, WorkerContext
from workers.feature import Feature, Published


@dataclass(frozen=True)
class AnchorRows:
    """One batch's anchor rows and the scorer's state after learning them."""

    prob: np.ndarray
    score: np.ndarray
    click: np.ndarray
    scorer_state: dict[str, np.ndarray]


@dataclass
class ScorerCache:
    """A model's shadow scorer as this trainer holds it (the feature's state)."""

    held: tuple[int, ProgressiveScorer] | None = None
    """The scorer and the snapshot version it is in step with (None: not loaded yet)."""


async def after_publish(ctx: WorkerContext, slot: ModelSlot, published: Published) -> None:
    """Score then learn the batch's observed plays with the model's shadow scorer and append
    the anchor rows with its state (models that keep anchors; the hook); for a
    learner that logs its placements, append its shown slots (:func:`placement_rows`)."""
    mk = ModelKeys(*slot.ref)
    if published.config.logs_placements:
        placed = placement_rows(published.config, published.applied, published.observed)
        if placed is not None:
            await ctx.anchors.append(mk, placed.prob, placed.score, placed.click, {},
                                     cap=SLOT_BUFFER)
        return
    if not published.config.keeps_anchors:
        return
    model = await scorer(ctx, slot, published.config, published.version - 1)
    rows = await asyncio.to_thread(score_plays, model, published.applied, published.observed)
    FEATURE.state(slot).held = (published.version, model)
    if rows is not None:
        await ctx.anchors.append(mk, rows.prob, rows.score, rows.click,
                                 rows.scorer_state, cap=ANCHOR_BUFFER)


async def scorer(ctx: WorkerContext, slot: ModelSlot, config: ModelConfig,
                 version: int) -> ProgressiveScorer:
    """The model's shadow scorer in step with snapshot ``version`` (cached, else loaded)."""
    cache = FEATURE.state(slot)
    if cache.held is not None and cache.held[0] == version:
        return cache.held[1]
    model = ProgressiveScorer(config.n_features, config.class_count)
    state = await ctx.anchors.scorer_state(ModelKeys(*slot.ref))
    if state is not None:
        model.model.set_state(state)
    cache.held = (version, model)
    return model


def score_plays(model: ProgressiveScorer, applied: Batch, observed: np.ndarray
                ) -> AnchorRows | None:
    """Score then learn the observed plays of ``applied`` in order (CPU: run in a thread).

    None when the batch has no observed click or no logged propensity.
    """
    if "click" not in applied or "prob" not in applied or not observed.any():
        return None
    X = np.asarray(applied["x"], dtype=np.float64)[observed]
    played = np.asarray(applied["played"], dtype=np.intp).reshape(-1)[observed]
    click = np.asarray(applied["click"], dtype=np.float64).reshape(-1)[observed]
    prob = np.asarray(applied["prob"], dtype=np.float64).reshape(-1)[observed]
    score = model.score_and_learn(X, played, click)
    return AnchorRows(prob, score, click, model.model.get_state())


def buffer_of(config: ModelConfig) -> int:
    """Anchor rows kept for the model ``config``."""
    return SLOT_BUFFER if config.logs_placements else ANCHOR_BUFFER


def placement_rows(config: ModelConfig, applied: Batch, observed: np.ndarray
                   ) -> AnchorRows | None:
    """The shown slots of the ``observed`` events of ``applied`` as anchor rows, for a model
    whose learner logs its placements (None when none was observed)."""
    if not observed.any():
        return None
    events = {name: np.asarray(value)[observed] for name, value in applied.items()}
    cls = config.learner_class
    slot, prob, score, click = cls.placement_rows(events)
    return AnchorRows(prob, score, pack_slots(slot, click), {})


FEATURE = Feature("anchors", state_factory=ScorerCache, after_publish=after_publish)
