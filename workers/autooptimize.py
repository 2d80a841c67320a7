"""Auto-optimization of a Personalizer loop (``isAutoOptimizationEnabled``): a trainer feature.

After a batch of a model whose config sets ``auto_optimize_seconds`` (at most every
:data:`CHECK_SECONDS` per model), the hook looks at the model's automatic evaluations
(records of ``evaluationType`` ``Auto`` among its Personalizer evaluations):

- none running and none started in the last ``auto_optimize_seconds``: it starts one over
  that last period, queued like a manual one with ``enablePolicyOptimization`` (the online
  and a random policy, and the search set of
  :func:`app.evaluation.personalizer.optimization_set`, each a job the jobs role runs);
- one running whose jobs all ended: it applies the switch rule
  (:func:`app.evaluation.personalizer.switch_to`: a searched setting whose noise-corrected
  95% interval lies wholly above the online policy's), and switches by noisyloop's
  challenger promotion (the setting added as a challenger from the model's state and
  promoted at once: one atomic step that marks the decision log and keeps versions), then
  keeps the evaluation with Personalizer's status ``OptimalPolicyApplied`` or
  ``OnlinePolicyRetained`` (``Failed`` when a job failed).

Every run and every switch is visible: the evaluation in ``list_evaluations``, the switch
as a ``promote`` marker in the decision log and a kept version, and
``noisyloop_auto_optimizations_total{outcome}`` (``started``, ``applied``, ``retained``,
``failed``).
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from app.evaluation.personalizer import (
    POLICIES,
    evaluation_record,
    optimization_set,
    other_policy,
    policies,
    succeeded,
    switch_to,
)
from app.learners.config import ModelConfig
from app.store.evaluationset import set_outcome
from app.store.keys import ModelKeys
from app.store.switching import switch_setting
from workers.context import ModelSlot, WorkerContext
from workers.feature import Feature, Published

logger = logging.getLogger(__name__)

#: Least seconds between two looks at one model's automatic evaluations.
CHECK_SECONDS = 10.0
#: Bootstrap resamples per interval of an automatic evaluation (as a manual one's default).
BOOTSTRAP = 200


@dataclass
class Checked:
    """When the hook last looked at the model (monotonic seconds)."""

    at: float = -float("inf")


def _auto(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("evaluationType") == "Auto"]


async def after_publish(ctx: WorkerContext, slot: ModelSlot, published: Published) -> None:
    """Start, or settle and act on, the model's automatic evaluation (module docstring)."""
    config = published.view.config  # as read for this batch (a setting changes no version)
    if config.auto_optimize_seconds is None:
        return
    checked = FEATURE.state(slot)
    if time.monotonic() - checked.at < CHECK_SECONDS:
        return
    checked.at = time.monotonic()
    mk = ModelKeys(*slot.ref)
    records = _auto(await ctx.store.named_evaluations.all(mk))
    running = [r for r in records if r["status"] == "Running"]
    if running:
        await settle(ctx, mk, running[0])
        return
    now = datetime.now(UTC)
    period = timedelta(seconds=config.auto_optimize_seconds)
    if any(datetime.fromisoformat(r["creationTime"]) > now - period for r in records):
        return
    await start(ctx, mk, config, now - period, now)


async def start(ctx: WorkerContext, mk: ModelKeys, config: ModelConfig, since: datetime,
                until: datetime) -> str | None:
    """Queue an automatic evaluation of ``[since, until]`` and keep its record; its id
    (None: the loop holds as many evaluations as it keeps)."""
    window = {"since_ms": int(since.timestamp() * 1000),
              "until_ms": int(until.timestamp() * 1000), "bootstrap": BOOTSTRAP}
    jobs = {source: await ctx.store.evaluations.queue(mk, {"policy": policy, **window})
            for policy, _, source in POLICIES}
    others = [other_policy(i, name, "OfflineExperimentation", setting)
              for i, (name, setting) in enumerate(optimization_set(config))]
    for one in others:
        jobs[one["job"]] = await ctx.store.evaluations.queue(mk, {"policy": one["config"],
                                                                   **window})
    evaluation_id = f"auto-{until.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
    record = evaluation_record(evaluation_id, "auto-optimization", "", since, until, until,
                               "Auto", jobs, others, config)
    if await ctx.store.named_evaluations.add(mk, evaluation_id, record) != "ok":
        logger.warning("auto-optimization of %s/%s: its evaluations are full; not run",
                       mk.tenant, mk.model)
        return None
    ctx.metrics.auto_optimizations.labels("started").inc()
    logger.info("auto-optimization of %s/%s: evaluation %s started", mk.tenant, mk.model,
                evaluation_id)
    return evaluation_id


async def settle(ctx: WorkerContext, mk: ModelKeys, record: dict[str, Any]) -> str:
    """Act on ``record``'s results once every job ended; its status then (``Running``
    before)."""
    outcome = await set_outcome(ctx.store.evaluations, mk, record["jobs"],
                                {key: name for key, name, _, _ in policies(record)})
    if outcome.status == "running":
        return "Running"
    if outcome.status == "failed":
        done = {**record, "status": "Failed", "description": outcome.why}
        ctx.metrics.auto_optimizations.labels("failed").inc()
    else:
        done = succeeded(record, outcome.results)
        chosen = switch_to(done["content"]["value"])
        done["status"] = "OnlinePolicyRetained"
        if chosen is not None:
            setting = next(o["config"] for o in record["others"] if o["name"] == chosen["name"])
            version = await switch_setting(ctx.store, mk, setting, "auto")
            if version is not None:
                done.update(status="OptimalPolicyApplied", optimalPolicy=chosen["name"],
                            description=f"{chosen['name']} applied as version {version}")
        ctx.metrics.auto_optimizations.labels(
            "applied" if done["status"] == "OptimalPolicyApplied" else "retained").inc()
    await ctx.store.named_evaluations.replace(mk, record["id"], done)
    logger.info("auto-optimization of %s/%s: evaluation %s %s", mk.tenant, mk.model,
                record["id"], done["status"])
    status: str = done["status"]
    return status


FEATURE = Feature("autooptimize", state_factory=Checked, after_publish=after_publish)
