"""A learning setting put in force from a model's current state: a challenger added and
promoted at once (the old champion dropped), so the switch is the promotion's one atomic
step (:meth:`app.store.challengers.ChallengerStore.promote`: the config and state together,
a ``promote`` marker in the decision log, the replaced and the new state kept as
versions).  What Personalizer's ``apply_from_evaluation`` (:mod:`app.api.personalizer_apply`)
and auto-optimization (:mod:`workers.autooptimize`) do."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from app.learners.config import ModelConfig
from app.store import Store
from app.store.challengers import AddRefused, PromoteRefused, challenger_config
from app.store.keys import ModelKeys
from app.store.util import utc_now

logger = logging.getLogger(__name__)


async def switch_setting(store: Store, mk: ModelKeys, setting: dict[str, Any],
                         prefix: str) -> int | None:
    """Put ``setting`` (``{"algorithm", "params"}``, of the model's algorithm and shape) in
    force through a challenger named ``prefix-<random>``; the new version (None: the model
    is gone or changed meanwhile, nothing switched)."""
    raw_config = await store.models.raw_config(mk)
    snap = await store.snapshots.load(mk)
    if raw_config is None or snap is None:
        return None
    config = ModelConfig.from_json(raw_config)
    name = f"{prefix}-{secrets.token_hex(6)}"
    definition = {"name": name, "algorithm": setting["algorithm"],
                  "params": setting["params"], "uid": secrets.token_hex(8),
                  "created_at": utc_now()}
    held, _ = await store.challengers.read(mk)
    try:
        await store.challengers.add(mk, definition, dict(snap.state), len(held) + 1)
        target = next(s for s in (await store.challengers.read(mk))[0] if s.name == name)
        return await store.challengers.promote(
            mk, target, raw_config, challenger_config(config, definition), None)
    except (AddRefused, PromoteRefused, StopIteration) as exc:
        logger.warning("switching %s/%s to %s: not switched (%r)", mk.tenant, mk.model,
                       setting, exc)
        await store.challengers.remove(mk, name)
        return None
