"""Confusion-matrix routes (learners that take one)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import Context, ModelDep
from app.api.errors import ApiError, unknown_model
from app.api.schemas.common import ErrorResponse
from app.api.schemas.confusion import ConfusionPutRequest, ConfusionResponse
from app.api.versions import reconfigure
from app.learners.base import Learner, ParamError
from app.learners.build import build_learner
from app.learners.confusion import validate_confusion
from app.learners.registry import ALGORITHMS, learner_class
from app.store.models import ModelView

router = APIRouter(prefix="/v1/models", tags=["confusion"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse}})


def _confusion_learner(view: ModelView) -> None:
    """404 unless the model's learner class takes a confusion matrix."""
    if view.config.learner_class.takes_confusion_matrix:
        return
    users = [f"{t} models with algorithm {a!r}" for t, a in ALGORITHMS
             if learner_class(t, a).takes_confusion_matrix]
    raise ApiError(404, "no_confusion_matrix",
                   f"a confusion matrix exists for {' and '.join(users) or 'no model'}")


def confusion_response(learner: Learner) -> ConfusionResponse:
    """The matrix the learner uses now, where it comes from, and why not ready."""
    report = learner.confusion_report()
    return ConfusionResponse(matrix=report.matrix,
                             source="configured" if report.configured else "estimated",
                             n_gold=report.n_gold, ready=report.ready, message=report.message)


@router.get("/{model_id}/confusion", response_model=ConfusionResponse)
async def get_confusion(view: ModelDep, ctx: Context) -> ConfusionResponse:
    """The confusion matrix in use: rows = noisy label p, columns = true class q."""
    _confusion_learner(view)
    snap = await ctx.store.snapshots.load(view.keys)
    if snap is None:
        raise unknown_model(view.config.model_id)
    return confusion_response(build_learner(view.config, snap.state))


@router.put("/{model_id}/confusion", response_model=ConfusionResponse,
            responses={422: {"model": ErrorResponse}})
async def put_confusion(body: ConfusionPutRequest, view: ModelDep,
                        ctx: Context) -> ConfusionResponse:
    """Use the client's matrix (validated: column-stochastic, invertible, well conditioned;
    422 otherwise), or ``{"matrix": null}`` to go back to the gold estimate.

    The matrix becomes the model's ``params.confusion`` (so a reset keeps it)
    and applies from the trainer's next batch.
    """
    _confusion_learner(view)
    config = view.config
    matrix = None
    if body.matrix is not None:
        try:
            matrix = validate_confusion(body.matrix, config.class_count,
                                        cond_max=config.params["cond_max"], field="matrix")
        except ParamError as exc:
            raise ApiError(422, "invalid_confusion", f"confusion matrix {exc.message}",
                           "matrix") from None
    confusion = None if matrix is None else matrix.tolist()
    _, learner = await reconfigure(
        ctx, view.tenant, config.model_id,
        lambda current: current.updated(params={**current.params, "confusion": confusion}),
        lambda learner: learner.set_confusion(matrix))
    return confusion_response(learner)
