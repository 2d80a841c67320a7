"""The rates a model's champion and challenger values are read at, and whether they can be
stood behind: one rule for ``GET .../challengers`` and the trainer's gauges.

The values' rewards ``h(f)`` are read at the model's current rates, with the
standard errors of a published estimate that has an interval
(:func:`app.learners.noise_publish.rate_errors`), so that each interval
carries the rates' error (:class:`app.evaluation.running.RunningValue`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from app.evaluation.running import Rates
from app.learners.config import ModelConfig
from app.learners.noise_publish import rate_errors
from app.store.keys import ModelKeys
from app.store.noise import NO_ESTIMATOR, NoiseRecord

if TYPE_CHECKING:
    from app.store import Store


def values_unreliable(noise: NoiseRecord | None,
                      errors: tuple[float, float] | None = None) -> str | None:
    """Why the values' rewards ``h(f)`` cannot be stood behind, or None: the rates are not
    reliable (:attr:`~app.store.noise.NoiseRecord.calibration_unreliable`), or they are an
    estimate whose standard ``errors`` are unknown (NREst gives none), so that the intervals
    (sampling only) leave them out."""
    return None if noise is None else noise.unreliable_reason(errors_carried=errors is not None)


def value_rates(noise: NoiseRecord | None, last: Mapping[str, Any] | None
                ) -> tuple[Rates, str | None]:
    """The rates of ``noise`` with the standard errors of the published estimate ``last``
    (the model's last anchor outcome) when they are that estimate and it has an interval,
    and why values read at them cannot be stood behind (:func:`values_unreliable`)."""
    if noise is None:
        return Rates(), None
    errors = rate_errors(last, noise.rho0, noise.rho1) if noise.status == "published" else None
    return (Rates(noise.rho0, noise.rho1, *(errors or (0.0, 0.0))),
            values_unreliable(noise, errors))


async def read_value_rates(store: Store, mk: ModelKeys, has_clicks: bool,
                           config: ModelConfig | None = None) -> tuple[Rates, str | None]:
    """:func:`value_rates` of the model as stored now, its record read for its ``config``
    when given (:func:`~app.store.noise.parse_noise`); a model whose feedback is not a click
    (``has_clicks`` False): no rates to apply (its sums add rewards as the learner corrected
    them), flagged when they were corrected by rates no estimator checks
    (:data:`~app.store.noise.NO_ESTIMATOR`)."""
    if not has_clicks:
        if config is None:
            return Rates(), None
        noise = await store.noise.get(mk, config)
        return Rates(), (NO_ESTIMATOR if noise is not None and not noise.estimable else None)
    noise = await store.noise.get(mk, config)
    if noise is None:
        return Rates(), None
    last = (await store.anchors.settings(mk)).last if noise.status == "published" else None
    return value_rates(noise, last)
