"""A model's drift setting (``PUT .../drift``) and what ``GET`` shows of its detector."""

from __future__ import annotations

from typing import Any

from app.api.configchange import change_config
from app.api.context import ApiContext
from app.api.schemas.models import DriftResponse, DriftSettings
from app.learners.config import ModelConfig
from app.learners.drift import PageHinkley
from app.store.drift import METHOD, SIGNAL, DriftPolicy


def drift_response(config: ModelConfig, saved: dict[str, Any] | None) -> DriftResponse:
    """The model's ``drift``: its action and the detector's last report (``saved``; a
    detector that has seen no event before the first)."""
    action = DriftPolicy.of(config).action
    if saved is None:
        idle = PageHinkley()
        saved = {"status": "warming_up", "detections": 0, "detected_at": None,
                 "detected_at_event": None, "events": 0, "signal": SIGNAL, "method": METHOD,
                 "statistic": 0.0, "threshold": idle.threshold, "delta": idle.delta}
    status = "off" if action == "none" else saved["status"]
    return DriftResponse.model_validate({**saved, "action": action, "status": status})


async def set_drift(ctx: ApiContext, tenant: str, model_id: str,
                    settings: DriftSettings) -> None:
    """Store ``settings`` in the model's config (the trainer acts on them from its next
    batch)."""
    wanted = settings.model_dump()

    def with_drift(current: ModelConfig) -> ModelConfig | None:
        if current.drift.model_dump(exclude_unset=True) == wanted:
            return None
        return current.updated(drift=wanted)

    await change_config(ctx, tenant, model_id, with_drift)
