"""The label budget of a regression model: how much of it was spent."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import Context, ModelDep
from app.api.errors import ApiError
from app.api.schemas.budget import LabelBudgetResponse
from app.api.schemas.common import ErrorResponse
from app.learners.build import budget_strategy

router = APIRouter(prefix="/v1/models", tags=["label budget"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse}})


@router.get("/{model_id}/label-budget", response_model=LabelBudgetResponse)
async def get_label_budget(view: ModelDep, ctx: Context) -> LabelBudgetResponse:
    """A regression model's label budget and the labels charged so far."""
    budget = view.config.label_budget
    if budget is None:
        raise ApiError(404, "no_label_budget", "this model has no label_budget (regression "
                       "models get one at creation)")
    state = (await ctx.store.open.budget(view.keys)).state
    strategy = budget_strategy(budget, view.config.budget_seed, state)
    return LabelBudgetResponse(budget=strategy.budget, strategy=budget.strategy,
                               rounds=strategy.rounds, labels_used=strategy.labels_used,
                               a=getattr(strategy, "a", None))
