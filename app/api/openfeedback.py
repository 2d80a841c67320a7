"""Feedback in parts (more noisy labels, more noisy copies) and examples without a decision.

A task with an :class:`~app.tasks.base.OpenPolicy` joins a decision only once
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
feedback.  The parts of a batch take two Lua calls in all, as if sent one
after another: one reads (contexts, parts so far, the budget), one takes
with a compare-and-set step per event; a concurrent part or
budget charge makes that event retry from a fresh read.  An open decision that times
out is learned from with the labels received (regression) or dropped
(noisy_input: too few copies would bias the update).

A model whose ``feedback.aggregation`` is ``sum`` (Personalizer's reward aggregation)
keeps every decision open until its deadline the same way: each feedback is joined with
the logged context (the task's ``join_context``) and added to the sum kept so far (the
task's ``add_feedback``), with the same compare-and-set step; when the wait time passed,
the sweeper learns the sum, exactly once (``expire_decision.lua``); a decision that got
none gets the model's timeout default, as any.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np

from app.api.context import ApiContext
from app.api.errors import ApiError, unknown_model
from app.learners.base import Learner
from app.learners.build import budget_strategy
from app.learners.config import BudgetSettings, ModelConfig
from app.store.events import new_event_id
from app.store.models import ModelView
from app.store.openfeedback import Budget, BudgetCharge, OpenState, OpenStep
from app.tasks import OpenPolicy, Task

#: Compare-and-set attempts per event before answering 503 (only reached under heavy
#: concurrent feedback for one model's label budget).
MAX_ATTEMPTS = 64

#: The wanted count of a summed decision: never reached, so it stays open until its deadline.
UNTIL_DEADLINE = 2**31 - 1

#: One event's result: ``("ok" | "open" | "unknown" | "duplicate", reply fields)``, or the
#: 422 that rejects it.
OpenResult = tuple[str, dict[str, int]] | ApiError


def stays_open(spec: Task, config: ModelConfig) -> bool:
    """Whether a feedback of ``config``'s model goes through :func:`take_open_many`: its task
    takes feedback in parts, or the model adds up its feedback until the deadline."""
    return spec.open_feedback is not None or config.feedback.aggregation == "sum"


async def take_open(ctx: ApiContext, view: ModelView, spec: Task, event_id: str,
                    fields: Mapping[str, np.ndarray]) -> tuple[str, dict[str, int]]:
    """Record one part (:func:`take_open_many` of one event; its 422 is raised)."""
    result = (await take_open_many(ctx, view, spec, [(event_id, fields)]))[0]
    if isinstance(result, ApiError):
        raise result
    return result


async def take_open_many(ctx: ApiContext, view: ModelView, spec: Task,
                         items: Sequence[tuple[str, Mapping[str, np.ndarray]]],
                         ) -> list[OpenResult]:
    """Record a part for each ``(event_id, fields)``, as if one after another, in two Lua
    calls (one read, one take) while nothing conflicts.

    Reply fields are ``{policy.reply: k}`` while ``k`` rows are still wanted
    (none for a summed decision, open until its deadline).  A repeated
    ``event_id`` waits for the outcome of its earlier part (a later wave); a
    step that meets a concurrent change (``"conflict"``) is re-read and
    retried.
    """
    policy = spec.open_feedback
    budget = view.config.label_budget if policy is not None and policy.budgeted else None
    results: list[OpenResult | None] = [None] * len(items)
    attempts = [0] * len(items)
    todo = list(range(len(items)))
    while todo:
        wave, todo = _wave(items, todo)
        for i in wave:
            attempts[i] += 1
            if attempts[i] > MAX_ATTEMPTS:
                raise ApiError(503, "store_busy", "too many concurrent feedback parts for this "
                               "model; retry", headers={"Retry-After": "1"})
        states, read_budget = await ctx.store.open.read_many(view.keys,
                                                             [items[i][0] for i in wave])
        planning: _Planner | _Summer = (
            _Summer(spec, view.apprenticed) if policy is None
            else _Planner(ctx, view, policy, budget, read_budget))
        steps: list[tuple[int, OpenStep]] = []
        for i, state in zip(wave, states, strict=True):
            if state.status != "ok":
                results[i] = (state.status, {})
                continue
            try:
                steps.append((i, await planning.step(*items[i], state)))
            except ApiError as exc:
                if exc.status != 422:
                    raise
                results[i] = exc
        outcomes = await ctx.store.open.take_many(view.keys, [step for _, step in steps])
        for (i, step), outcome in zip(steps, outcomes, strict=True):
            if outcome.status == "conflict":
                todo.append(i)
            elif outcome.status == "open":
                results[i] = ("open", planning.reply(step))
            else:
                results[i] = (outcome.status, {})
        todo.sort()
    assert None not in results  # every event ended in a result or a retry
    return cast(list[OpenResult], results)


def _wave(items: Sequence[tuple[str, Mapping[str, np.ndarray]]], todo: list[int],
          ) -> tuple[list[int], list[int]]:
    """``todo`` split into the first index of each event id and the rest (for later waves).

    >>> _wave([("a", {}), ("b", {}), ("a", {})], [0, 1, 2])
    ([0, 1], [2])
    """
    seen: set[str] = set()
    wave: list[int] = []
    rest: list[int] = []
    for i in todo:
        eid = items[i][0]
        (rest if eid in seen else wave).append(i)
        seen.add(eid)
    return wave, rest


class _Planner:
    """The steps of one wave: each event's merged rows, wanted count and budget charge.

    Budget charges follow each other: the strategy read once is charged
    event after event, each charge expecting the rounds the one before left
    (the Lua step checks them in the same order).
    """

    def __init__(self, ctx: ApiContext, view: ModelView, policy: OpenPolicy,
                 budget: BudgetSettings | None, read: Budget) -> None:
        self.ctx, self.view, self.policy = ctx, view, policy
        self.strategy = (budget_strategy(budget, view.config.budget_seed, read.state)
                         if budget is not None else None)
        self.rounds = read.rounds
        self._learner: Learner | None = None

    async def step(self, event_id: str, fields: Mapping[str, np.ndarray],
                   state: OpenState) -> OpenStep:
        """This part's step for an event whose decision is still waiting."""
        policy = self.policy
        charge = None
        if state.partial is None:
            merged = dict(fields)
            wanted, charge = await self._first_wanted(state, merged)
            expected = None
        else:
            merged = _append(policy, state.partial.fields, fields)
            wanted, expected = state.partial.wanted, state.partial.received
        return OpenStep(event_id, merged, wanted, int(merged[policy.part_field].shape[0]),
                        expected, policy.enqueue_on_expiry, charge)

    def reply(self, step: OpenStep) -> dict[str, int]:
        """The reply fields of a decision left open: the rows still wanted."""
        return {self.policy.reply: step.wanted - step.received}

    async def _first_wanted(self, state: OpenState, fields: dict[str, np.ndarray],
                            ) -> tuple[int, BudgetCharge | None]:
        """Rows wanted in total for a first part, and the label-budget round to charge."""
        policy = self.policy
        for name in policy.fixed:
            if name not in fields:
                raise ApiError(422, "invalid_feedback", f"the first feedback of an event needs "
                               f"{name!r}", name)
        rows = fields[policy.part_field]
        learner = await self._learner_now()
        wanted = policy.first_wanted(learner, state.context, fields)
        if self.strategy is None or rows.shape[0] != 1:
            return wanted, None
        prediction = float(learner.decide(state.context["x"], explore=False).output["value"])
        extra = self.strategy.labels_wanted(float(rows[0]), prediction)
        charge = BudgetCharge(self.rounds, self.strategy.get_state(), self.strategy.rounds)
        self.rounds = self.strategy.rounds
        return 1 + extra, charge

    async def _learner_now(self) -> Learner:
        if self._learner is None:
            self._learner = await _learner(self.ctx, self.view)
        return self._learner


class _Summer:
    """The steps of one wave of a model that adds up its feedback: each event's feedback
    joined with its context and added to the sum kept, open until the deadline; with
    ``apprenticed`` (the model logged apprentice decisions), the sum's observed reward
    kept with it for the apprentice counters."""

    def __init__(self, spec: Task, apprenticed: bool) -> None:
        assert spec.add_feedback is not None
        self.spec, self.add = spec, spec.add_feedback
        self.reward = spec.reward if apprenticed else None

    async def step(self, event_id: str, fields: Mapping[str, np.ndarray],
                   state: OpenState) -> OpenStep:
        """This feedback's step: the sum so far with it added (422 from ``join_context``)."""
        join = self.spec.join_context
        joined = join(fields, state.context) if join is not None else dict(fields)
        kept = state.partial
        total = joined if kept is None else self.add(kept.fields, joined)
        return OpenStep(event_id, total, UNTIL_DEADLINE,
                        1 if kept is None else kept.received + 1,
                        None if kept is None else kept.received, True,
                        reward=None if self.reward is None else self.reward(total))

    def reply(self, step: OpenStep) -> dict[str, int]:
        """No reply fields: the decision waits for its deadline, not for more parts."""
        return {}


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
        raise unknown_model(view.config.model_id)
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
