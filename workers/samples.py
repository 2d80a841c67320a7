"""The trainer's half of NREst: each published batch's observed clicks kept as samples.

For every model whose learner declares ``keeps_noise_samples``, the rows of
a published batch that are observed feedback with a click are appended as
``(x, played, click)`` to the model's capped sample buffer
(:class:`app.store.nrest.SampleStore`; its class's ``noise_samples``, else
the worker's ``nrest_buffer``), from which the jobs role fits NREst
(:mod:`workers.nrest`).  A trainer feature (:mod:`workers.feature`) with no state.
"""

from __future__ import annotations

import numpy as np

from app.learners.base import Batch
from app.learners.config import ModelConfig
from app.store.keys import ModelKeys
from workers.context import ModelSlot, WorkerContext
from workers.feature import Feature, Published
from workers.nrest import buffer_size, keeps_samples


def samples_of(config: ModelConfig, applied: Batch, observed: np.ndarray,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(X, played, clicks)`` of the rows of ``applied`` that are ``observed`` feedback
    with a click (None: none, or the model keeps no samples)."""
    if not keeps_samples(config) or "click" not in applied or not observed.any():
        return None
    return (applied["x"][observed],
            np.asarray(applied["played"][observed], dtype=np.int64).reshape(-1),
            np.asarray(applied["click"][observed], dtype=float).reshape(-1))


async def after_publish(ctx: WorkerContext, slot: ModelSlot, published: Published) -> None:
    """Append the batch's samples to the model's buffer (the hook)."""
    samples = samples_of(published.config, published.applied, published.observed)
    if samples is not None:
        await ctx.samples.append(ModelKeys(*slot.ref), *samples,
                                 cap=buffer_size(ctx, published.config))


FEATURE: Feature[None] = Feature("samples", after_publish=after_publish)
