"""The normal form of a decision request (predict or rank), whoever parsed its body.

The pydantic schemas (:mod:`app.api.schemas.predict`, :mod:`app.api.schemas.rank`,
through :func:`predict_request` and :func:`rank_request`) and the fast path's
hand parsers (:mod:`app.api.fastbody`) both produce a :class:`DecisionRequest`;
everything after the parse (the checks against the model, the decision, its
log and the answer: :mod:`app.api.deciding`) reads only that.  Equal bodies give
equal requests whichever parser read them (``tests/api/test_fastbody_property.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from app.api.schemas.predict import PredictRequest
from app.api.schemas.rank import RankBatchRequest, RankRequest
from app.fields import NamedFeatures, SparseFeatures
from app.learners.base import Decision
from app.store.codec import stored_forms

#: One input as the request gives it: dense numbers, sparse or named (checked against the
#: model later: :mod:`app.features`).
Features = list[float] | SparseFeatures | NamedFeatures


@dataclass(frozen=True, slots=True)
class DecisionOptions:
    """How to decide: ``explore`` (false: greedy, nothing logged), ``defer`` (logged, awaiting
    activation), ``slots`` (rank: at most the model's) and the apprentice's ``baseline`` as
    sent (predict: a label, or a continuous model's action, or one per instance; rank: a
    ranking of action ids)."""

    explore: bool = True
    defer: bool = False
    slots: int | None = None
    baseline: int | float | list[int] | list[float] | list[str] | None = None


@dataclass(frozen=True, slots=True)
class SlotCandidates:
    """Candidates placed slot by slot, each slot with its own view of them (a Personalizer
    multi-slot rank): per slot, every candidate's features when placed there and whether the
    slot allows it."""

    features: list[list[Features]]
    allowed: list[list[bool]]


@dataclass(frozen=True, slots=True)
class Candidates:
    """The candidate actions of one rank decision: the client's ids and their features (and,
    for candidates seen differently by each slot, ``per_slot``: then the decision fills one
    slot per entry)."""

    ids: list[str]
    features: list[Features]
    per_slot: SlotCandidates | None = None


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """Decide for each of ``contexts``: among its ``candidates`` (rank; None: predict), with
    ``options`` (rank: one per context; predict: one for all); ``batch``: answer a list
    (``instances`` or ``requests``), not one decision.

    >>> request = predict_request(PredictRequest(instances=[[1.0, 2.0]], explore=False))
    >>> request.contexts, request.candidates, request.options[0].explore, request.batch
    ([[1.0, 2.0]], None, False, True)
    """

    contexts: list[Features]
    candidates: list[Candidates] | None
    options: list[DecisionOptions]
    batch: bool


def predict_request(body: PredictRequest) -> DecisionRequest:
    """The normal form of a validated predict body."""
    options = [DecisionOptions(body.explore, body.defer, None, body.baseline)]
    if body.features is not None:
        return DecisionRequest([body.features], None, options, False)
    assert body.instances is not None
    return DecisionRequest(body.instances, None, options, True)


def rank_request(body: RankRequest | RankBatchRequest) -> DecisionRequest:
    """The normal form of a validated rank body (one request or a batch)."""
    batch = isinstance(body, RankBatchRequest)
    requests = body.requests if isinstance(body, RankBatchRequest) else [body]
    return DecisionRequest(
        [r.features for r in requests],
        [Candidates([a.id for a in r.actions], [a.features for a in r.actions])
         for r in requests],
        [DecisionOptions(r.explore, r.defer, r.slots, r.baseline) for r in requests], batch)


@dataclass(frozen=True, slots=True)
class Decided:
    """The decisions of a request, before they are logged: per decision the context to log,
    its arrays as the log stores them (:func:`stored_decision`; None: not explored, nothing
    logged), in apprentice mode whether the learner's own
    choice agreed with the baseline served (else None), and for rankings the shown ids by
    their hash (for the model's id table; None for predictions)."""

    decisions: list[Decision]
    contexts: list[dict[str, np.ndarray] | None]
    agreed: list[bool] | None
    shown: list[dict[int, str]] | None


def stored_decision(decision: Decision) -> Decision:
    """``decision`` with its context's arrays as the log stores them
    (:func:`~app.store.codec.stored_form`): a row of a wide batch keeps its non-zeros
    only, not a view of the batch."""
    return replace(decision, context=stored_forms(decision.context))
