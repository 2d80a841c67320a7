"""Confusion-matrix routes (noisy_label with UMA) and the label budget (regression)."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter

from app.api.deps import Context, ModelDep
from app.api.errors import ApiError, unknown_model
from app.api.schemas.common import ErrorResponse
from app.api.schemas.confusion import ConfusionPutRequest, ConfusionResponse, LabelBudgetResponse
from app.learners.base import ParamError
from app.learners.confusion import estimate_confusion, validate_confusion
from app.learners.uma import SOURCE_GIVEN, SOURCE_GOLD, SOURCE_IDENTITY
from app.learning import budget_seed, budget_strategy, build_learner
from app.store.models import ModelView
from app.store.snapshots import PublishConflict

router = APIRouter(prefix="/v1/models", tags=["confusion"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse}})
#: Read-modify-publish attempts of a PUT racing the trainer.
PUT_ATTEMPTS = 20


def _uma_only(view: ModelView) -> None:
    if view.config["task"] != "noisy_label" or view.config["algorithm"] != "uma":
        raise ApiError(404, "no_confusion_matrix", "a confusion matrix exists for noisy_label "
                       "models with algorithm 'uma'")


def confusion_response(config: dict[str, Any], state: dict[str, np.ndarray]) -> ConfusionResponse:
    """The matrix UMA uses now (``confusion_``), where it comes from, and why not ready."""
    source = int(state["confusion_source_"])
    counts = np.asarray(state["gold_counts_"])
    message = None
    if source == SOURCE_IDENTITY:
        params = config["params"]
        estimate = estimate_confusion(counts, params["gold_min_per_class"])
        if estimate is None:
            message = (f"estimated from gold examples once every class has "
                       f"{params['gold_min_per_class']} (fewest now: "
                       f"{int(counts.sum(axis=0).min())}); until then UMA uses the identity")
        else:
            try:
                validate_confusion(estimate, config["n_classes"], cond_max=params["cond_max"],
                                   field="gold estimate")
                message = "gold examples suffice; the estimate is used from UMA's next step"
            except ParamError as exc:
                message = str(exc)
    return ConfusionResponse(matrix=np.asarray(state["confusion_"]).tolist(),
                             source="configured" if source == SOURCE_GIVEN else "estimated",
                             n_gold=int(counts.sum()), ready=source in (SOURCE_GIVEN, SOURCE_GOLD),
                             message=message)



@router.get("/{model_id}/confusion", response_model=ConfusionResponse)
async def get_confusion(view: ModelDep, ctx: Context) -> ConfusionResponse:
    """The confusion matrix in use: rows = noisy label p, columns = true class q."""
    _uma_only(view)
    snap = await ctx.store.snapshots.load(view.keys)
    if snap is None:
        raise unknown_model(view.config["model_id"])
    return confusion_response(view.config, snap.state)


@router.put("/{model_id}/confusion", response_model=ConfusionResponse,
            responses={422: {"model": ErrorResponse}})
async def put_confusion(body: ConfusionPutRequest, view: ModelDep,
                        ctx: Context) -> ConfusionResponse:
    """Use the client's matrix (validated: column-stochastic, invertible, well conditioned;
    422 otherwise), or ``{"matrix": null}`` to go back to the gold estimate.

    The matrix becomes the model's ``params.confusion`` (so a reset keeps it)
    and applies from the trainer's next batch.
    """
    _uma_only(view)
    config = view.config
    matrix = None
    if body.matrix is not None:
        try:
            matrix = validate_confusion(body.matrix, config["n_classes"],
                                        cond_max=config["params"]["cond_max"], field="matrix")
        except ParamError as exc:
            raise ApiError(422, "invalid_confusion", f"confusion matrix {exc.message}",
                           "matrix") from None
    config = {**config, "params": {**config["params"],
                                   "confusion": None if matrix is None else matrix.tolist()}}
    if not await ctx.store.models.set_config(view.tenant, config):
        raise unknown_model(config["model_id"])
    for _ in range(PUT_ATTEMPTS):
        snap = await ctx.store.snapshots.load(view.keys)
        if snap is None:
            raise unknown_model(config["model_id"])
        learner = build_learner(config, snap.state)
        learner.set_confusion(matrix)  # type: ignore[attr-defined]
        state = learner.get_state()
        try:
            await ctx.store.snapshots.publish(view.keys, state, expected_version=snap.version)
        except PublishConflict as exc:
            if exc.code == -3:
                raise unknown_model(config["model_id"]) from None
            continue  # the trainer published meanwhile: redo on its state
        ctx.cache.forget(view.tenant, config["model_id"])
        return confusion_response(config, state)
    raise ApiError(503, "store_busy", "the model kept changing; retry",
                   headers={"Retry-After": "1"})


@router.get("/{model_id}/label-budget", response_model=LabelBudgetResponse)
async def get_label_budget(view: ModelDep, ctx: Context) -> LabelBudgetResponse:
    """A regression model's label budget and the labels charged so far."""
    budget = view.config.get("label_budget")
    if budget is None:
        raise ApiError(404, "no_label_budget", "this model has no label_budget (regression "
                       "models get one at creation)")
    _, state = await ctx.store.open.budget(view.keys)
    strategy = budget_strategy(budget, budget_seed(view.config), state)
    return LabelBudgetResponse(budget=strategy.budget, strategy=budget["strategy"],
                               rounds=strategy.rounds, labels_used=strategy.labels_used,
                               a=getattr(strategy, "a", None))
