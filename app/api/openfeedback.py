"""Feedback in parts (more noisy labels, more noisy copies) and examples without a decision.

A task with an :class:`~app.api.tasks.OpenPolicy` joins a decision only once
enough *rows* of its growing field arrived: ``values`` (noisy labels) for
``regression``, ``copies`` (noisy copies of the instance) for
``noisy_input``.  The first part fixes the wanted count:

* regression: the labels sent; if exactly one was sent and the model has a
  ``label_budget``, its strategy (:mod:`app.learners.budget`, state in
  Redis) may want ``k`` more: the round is charged ``1 + k`` labels at once,
  so the budget holds whatever the client does next;
* noisy_input: the copies the round's plan needs
  (``KernelOGD.copies_needed`` of the logged context).

While fewer rows arrived, the 202 response says ``more_labels: k`` /
``more_copies: k`` and the decision stays open: the parts received so far
are stored beside the context (:class:`~app.store.openfeedback.OpenFeedbackStore`),
each further part with the same ``event_id`` appends its rows, and the part
that completes the count joins the event (all rows) exactly once, like any
feedback.  Each step is one compare-and-set Lua call; a concurrent part or
budget charge makes it retry from a fresh read.  An open decision that times
out is learned from with the labels received (regression) or dropped
(noisy_input: too few copies would bias the update).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from app.api.context import ApiContext
from app.api.errors import ApiError, unknown_model
from app.api.tasks import OpenPolicy, TaskSpec
from app.learners.base import Learner
from app.learning import budget_seed, budget_strategy
from app.store.events import new_event_id
from app.store.models import ModelView
from app.store.openfeedback import BudgetCharge, OpenState

#: Compare-and-set attempts before answering 503 (only reached under heavy
#: concurrent feedback for one model's label budget).
MAX_ATTEMPTS = 64


async def take_open(ctx: ApiContext, view: ModelView, spec: TaskSpec, event_id: str,
                    fields: Mapping[str, np.ndarray]) -> tuple[str, dict[str, int]]:
    """Record one part; returns ``("ok" | "open" | "unknown" | "duplicate", reply fields)``.

    Reply fields are ``{policy.reply: k}`` while ``k`` rows are still wanted.
    """
    policy = spec.open_feedback
    assert policy is not None
    config = view.config
    budget = config.get("label_budget") if policy.budgeted else None
    mk = view.keys
    for _ in range(MAX_ATTEMPTS):
        state = await ctx.store.open.read(mk, event_id, budget=budget is not None)
        if state.status != "ok":
            return state.status, {}
        charge = None
        if state.partial is None:
            merged = dict(fields)
            wanted, charge = await _first_wanted(ctx, view, policy, state, merged, budget)
            expected = None
        else:
            merged = _append(policy, state.partial.fields, fields)
            wanted, expected = state.partial.wanted, state.partial.received
        received = int(merged[policy.part_field].shape[0])
        outcome = await ctx.store.open.take(
            mk, event_id, merged, wanted=wanted, received=received, expected=expected,
            enqueue_on_expiry=policy.enqueue_on_expiry, charge=charge)
        if outcome.status == "conflict":
            continue
        if outcome.status == "open":
            return "open", {policy.reply: wanted - received}
        return outcome.status, {}
    raise ApiError(503, "store_busy", "too many concurrent feedback parts for this model; "
                   "retry", headers={"Retry-After": "1"})


async def _first_wanted(ctx: ApiContext, view: ModelView, policy: OpenPolicy, state: OpenState,
                        fields: dict[str, np.ndarray], budget: Mapping[str, Any] | None,
                        ) -> tuple[int, BudgetCharge | None]:
    """Rows wanted in total for a first part, and the label-budget round to charge."""
    for name in policy.fixed:
        if name not in fields:
            raise ApiError(422, "invalid_feedback", f"the first feedback of an event needs "
                           f"{name!r}", name)
    rows = fields[policy.part_field]
    learner = await _learner(ctx, view)
    wanted = policy.first_wanted(learner, state.context, fields)
    if budget is None or rows.shape[0] != 1:
        return wanted, None
    strategy = budget_strategy(budget, budget_seed(view.config), state.budget_state)
    prediction = float(learner.decide(state.context["x"], explore=False).output["value"])
    extra = strategy.labels_wanted(float(rows[0]), prediction)
    return 1 + extra, BudgetCharge(state.budget_rounds, strategy.get_state(), strategy.rounds)


def _append(policy: OpenPolicy, stored: Mapping[str, np.ndarray],
            fields: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The stored parts with this part's rows appended (its fixed fields must agree)."""
    rows = fields[policy.part_field]
    if rows.shape[0] == 0:
        raise ApiError(422, "invalid_feedback", f"a further part of an event must carry at "
                       f"least one row of {policy.part_field!r}", policy.part_field)
    for name in policy.fixed:
        given = fields.get(name)
        if given is None or np.all(np.isnan(given)):
            continue  # omitted
        if not np.array_equal(given, stored.get(name, np.nan), equal_nan=True):
            raise ApiError(422, "invalid_feedback", f"{name!r} differs from the first part of "
                           "this event; repeat it or leave it out", name)
    merged = dict(stored)
    merged[policy.part_field] = np.concatenate([stored[policy.part_field], rows])
    return merged


async def _learner(ctx: ApiContext, view: ModelView) -> Learner:
    found = await ctx.cache.get(view)
    if found is None:
        raise unknown_model(view.config["model_id"])
    return found[0]


async def add_examples(ctx: ApiContext, view: ModelView,
                       examples: Sequence[Mapping[str, np.ndarray]]) -> None:
    """Queue examples posted without a prior decision (their fields hold the input ``x``).

    The logged context is what the learner would log for ``x`` now
    (``decide`` without exploration), so these events stack with the others.
    """
    learner = await _learner(ctx, view)
    rows = []
    for fields in examples:
        feedback = {k: v for k, v in fields.items() if k != "x"}
        context = learner.decide(fields["x"], explore=False).context
        rows.append((new_event_id(), context, feedback))
    await ctx.store.open.add_examples(view.keys, rows)
