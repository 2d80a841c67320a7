"""The trainer's half of challengers: configurations that follow a model's events without serving.

After the champion's batch is published (:func:`after_publish`, a trainer
hook of :mod:`workers.hooks`), every challenger of the model

1. decides for the batch's logged inputs with its *current* state
   (progressive validation: before it learns them) and turns its draws
   into importance weights against the logged plays
   (:func:`app.evaluation.running.match_weights`);
2. learns the batch: its own decision fields with the logged play
   (:data:`~app.learners.offpolicy.PLAY_FIELDS`) and feedback;

a challenger of a task that scores its own (``continuous``: the challenger's smoothed
density of the logged action over the logged one) takes its task's weights and rewards,
corrected at the rates in force when it learns them;
a challenger of a model that ranks candidates (``ranks_candidates``) is
scored on slot 0 only: it draws a first item among the candidates the
decision logged (the API logs them while the model has challengers) and
the weight is the match with the logged slot-0 item over its logged
placement probability (:func:`first_slot_weights`), the reward ``h(f)`` of
the slot-0 click (slot 0 is always examined, so no position-bias weight
enters); it then learns the slate as logged, as the champion does;

and the IPS/SNIPS sums of each challenger and the champion's on-policy sums
(of the observed clicks: the rates are applied when a value is read,
:class:`app.evaluation.running.RunningValue`) are saved with the states in
one Lua step (:class:`app.store.challengers.ChallengerStore`), each only
if nobody changed it since it was read.  A challenger that raises, or whose
state turns non-finite, is saved as ``failed`` with the reason and skipped
from then on; nothing here raises into the trainer: a failure of this step
(the store, a timeout) is logged and the challengers miss that batch.

The challengers are cached per model, the feature's state (:class:`Following`, in
the model's slot: :mod:`workers.feature`; definitions re-read at most every
:data:`REFRESH_SECONDS`; a failed guarded save drops the entry, so another
trainer's or a promotion's changes are reloaded from the store).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np
import orjson

from app.evaluation.running import (
    CLICK_SUMS,
    Rates,
    click_sums,
    logged_click,
    logged_propensity,
    match_weights,
    shown_value,
)
from app.learners.base import Batch, CandidateRanker, Learner
from app.learners.build import apply_noise_rates, build_learner
from app.learners.config import ModelConfig
from app.learners.offpolicy import PLAY_FIELDS, learn_finite, with_logged_play
from app.store.challengers import ChallengerSave, StoredChallenger, challenger_config
from app.store.keys import ModelKeys
from app.store.noise import UNRELIABLE_REASONS
from app.store.util import utc_now
from app.store.values import read_value_rates
from app.tasks import get_task
from app.tasks.base import ChallengerScoring
from workers import ModelRef
from workers.context import ModelSlot, WorkerContext
from workers.feature import Feature, Published

logger = logging.getLogger(__name__)

#: Seconds between two reads of a model's challenger definitions (a new challenger starts
#: following within this long).
REFRESH_SECONDS = 1.0


@dataclass
class Follower:
    """One challenger as the trainer holds it."""

    stored: StoredChallenger
    learner: Learner | None
    """None: failed (skipped)."""
    error: str | None = None
    """Why it failed, when the store does not know yet."""


@dataclass
class ModelChallengers:
    """The challengers of one model held by this trainer."""

    read_at: float
    followers: dict[str, Follower] = field(default_factory=dict)
    champion_raw: bytes | None = None
    """The champion's stats as last read or saved."""


@dataclass
class Following:
    """A model's challengers as this trainer follows them (the feature's state)."""

    held: ModelChallengers | None = None
    """None: read from the store at the model's next batch."""


async def after_publish(ctx: WorkerContext, slot: ModelSlot, published: Published) -> None:
    """Score, then learn, the published batch with every challenger of the model and save
    their states and sums (module docstring; the hook).  Never
    raises."""
    try:
        await _follow(ctx, slot, published.config, published.applied, published.last_id,
                      published.rates)
    except Exception as exc:
        logger.warning("trainer: challengers of %s/%s missed a batch (%r)", *slot.ref, exc)
        FEATURE.state(slot).held = None


async def _follow(ctx: WorkerContext, slot: ModelSlot, config: ModelConfig, applied: Batch,
                  last_id: str, rates: tuple[float, float]) -> None:
    ref = slot.ref
    mk = ModelKeys(*ref)
    following = FEATURE.state(slot)
    held = following.held
    if held is None or time.monotonic() - held.read_at >= REFRESH_SECONDS:
        held = following.held = await _refresh(ctx, mk, config, held)
    if not held.followers:
        return
    live = [f for f in held.followers.values() if f.learner is not None]
    spec = get_task(config.task)
    scoring = spec.challengers
    try:
        outcomes = await asyncio.wait_for(
            asyncio.to_thread(_run_all, live, applied, rates, scoring),
            ctx.config.handler_timeout)
    except TimeoutError:
        following.held = None  # the thread may still change the learners
        raise
    # a task's own rewards are summed as corrected now: read back at no further correction
    at = Rates(*rates) if scoring is None else Rates()
    reward = _clicks(applied) if scoring is None else scoring.rewards(applied, rates)
    champion = click_sums(_stats(held.champion_raw), at)
    if reward is not None:
        champion.add(np.ones(len(reward)), reward)
    saves = [_save_of(follower, outcome, reward, last_id, at)
             for follower, outcome in zip(live, outcomes, strict=True)]
    for follower in held.followers.values():
        if follower.learner is None and follower.error is not None:  # failed when loaded
            saves.append(_save_of(follower, follower.error, reward, last_id, at))
    champion_stats = {"sums": champion.to_list(), "events": champion.n, "reward": CLICK_SUMS,
                      "updated_at": utc_now()}
    champion_raw, raws = await ctx.store.challengers.save(
        mk, (held.champion_raw, champion_stats), saves)
    if champion_raw is None:
        held.read_at = -math.inf  # someone else wrote it: re-read next batch
    held.champion_raw = champion_raw
    for save, raw in zip(saves, raws, strict=True):
        name = save.challenger.name
        follower = held.followers[name]
        if raw is None:
            del held.followers[name]  # removed, promoted or saved by another trainer
            continue
        follower.stored = replace(follower.stored, stats=save.stats, raw_stats=raw)
        if save.state is None:
            follower.learner, follower.error = None, None
    _record(ctx, ref, champion_stats, held,
            await read_value_rates(ctx.store, mk, spec.has_clicks, config))


def _stats(raw: bytes | None) -> dict[str, Any] | None:
    """Raw stats JSON, parsed (None: none yet)."""
    return orjson.loads(raw) if raw else None


def _save_of(follower: Follower, outcome: np.ndarray | str | None, reward: np.ndarray | None,
             last_id: str, rates: Rates) -> ChallengerSave:
    """The stats (and state) to save of a challenger after a batch: ``outcome`` is its
    weights (None: no logged propensity to score against; NaN: an event it could not
    score, left out of its sums) or why it failed; ``reward``: the observed clicks
    (``rates``: those in force, to map older stats' sums back to clicks)."""
    old = follower.stored.stats or {}
    value = click_sums(old, rates)
    if isinstance(outcome, str):
        stats = {**old, "sums": value.to_list(), "events": value.n, "reward": CLICK_SUMS,
                 "status": "failed", "error": outcome, "updated_at": utc_now()}
        return ChallengerSave(follower.stored, stats, None)
    if outcome is not None and reward is not None:
        scored = ~np.isnan(outcome)
        value.add(outcome[scored], reward[scored])
    stats = {"sums": value.to_list(), "events": value.n, "reward": CLICK_SUMS,
             "last_id": last_id, "status": "following", "error": None, "updated_at": utc_now()}
    assert follower.learner is not None
    return ChallengerSave(follower.stored, stats, follower.learner.get_state())


def _clicks(applied: Batch) -> np.ndarray | None:
    """Each event's observed click (a slate's slot 0); None without clicks or logged
    propensities."""
    clicks = logged_click(applied)
    if clicks is None or logged_propensity(applied) is None:
        return None
    return clicks


def _run_all(followers: list[Follower], applied: Batch, rates: tuple[float, float],
             scoring: ChallengerScoring | None) -> list[np.ndarray | str | None]:
    """Each follower's :func:`score_and_learn` (CPU: run in a thread); a failure is its
    reason, as text."""
    out: list[np.ndarray | str | None] = []
    for follower in followers:
        assert follower.learner is not None
        try:
            out.append(score_and_learn(follower.learner, applied, rates, scoring))
        except Exception as exc:
            out.append(f"{type(exc).__name__}: {exc}")
    return out


def score_and_learn(learner: Learner, applied: Batch, rates: tuple[float, float],
                    scoring: ChallengerScoring | None = None) -> np.ndarray | None:
    """The importance weights of ``learner``'s draws on the logged plays of ``applied``
    (None when the log has no propensities; NaN for an event it cannot score), or the
    weights its task's ``scoring`` gives, then learn the batch (module docstring).

    Raises when the learner refuses the batch or its state turns non-finite.
    """
    propensity = logged_propensity(applied)
    weights: np.ndarray | None
    if learner.ranks_candidates:  # slates: scored on slot 0, learned as logged
        weights = (None if propensity is None
                   else first_slot_weights(cast(CandidateRanker, learner), applied, propensity))
        batch = applied
    else:
        own = learner.decide_contexts(np.asarray(applied["x"], dtype=np.float64), explore=True)
        if scoring is not None:
            weights = scoring.weights(learner, applied)
        else:
            weights = (None if propensity is None or "played" not in applied
                       else match_weights(own["played"], applied["played"], propensity))
        batch = with_logged_play(own, {k: applied[k] for k in (*PLAY_FIELDS,
                                                               *learner.feedback_fields)
                                       if k in applied})
    apply_noise_rates(learner, *rates)
    learn_finite(learner, batch)
    return weights


def first_slot_weights(ranker: CandidateRanker, applied: Batch,
                       propensity: np.ndarray) -> np.ndarray:
    """Per event, ``1[the ranker's slot-0 draw among the logged candidates is the logged
    slot-0 item] / (copies * p)``: the unbiased importance weight of its first placement
    (``copies``: candidates with the logged item's features, which it cannot tell apart);
    NaN where the decision logged no candidates (made while the model had no challengers)."""
    X = np.asarray(applied["x"], dtype=np.float64)
    weights = np.full(len(propensity), np.nan)
    if "candidates" not in applied:
        return weights
    first = np.asarray(applied["actions"], dtype=np.float64)[:, 0]
    for i, rows in enumerate(np.asarray(applied["candidates"], dtype=np.float64)):
        candidates = rows[~np.isnan(rows).all(axis=1)]  # without the batch's padding
        same = np.all(candidates == first[i], axis=1)
        if not same.any():
            continue
        pick = ranker.decide(X[i], True, actions=candidates, slots=1).output["ranking"][0]
        weights[i] = float(same[pick["index"]]) / (same.sum() * propensity[i])
    return weights


async def _refresh(ctx: WorkerContext, mk: ModelKeys, config: ModelConfig,
                   held: ModelChallengers | None) -> ModelChallengers:
    """The model's challengers as stored now; cached ones whose definition is unchanged are
    kept as they are."""
    definitions = await ctx.store.challengers.definitions(mk)
    fresh = ModelChallengers(time.monotonic())
    old = held.followers if held is not None else {}
    for name in set(old) - set(definitions):
        ctx.metrics.forget_challenger(mk.tenant, mk.model, name)
    if not definitions:
        return fresh
    fresh.champion_raw = (held.champion_raw if held is not None and held.read_at > -math.inf
                          else await ctx.store.challengers.champion_stats(mk))
    for name, raw in definitions.items():
        kept = old.get(name)
        if kept is not None and kept.stored.raw_definition == raw:
            fresh.followers[name] = kept
            continue
        stored, state = await ctx.store.challengers.load(mk, raw)
        if state is None:
            continue  # removed since
        fresh.followers[name] = _follower(stored, config, state)
    return fresh


def _follower(stored: StoredChallenger, config: ModelConfig,
              state: dict[str, np.ndarray]) -> Follower:
    """A follower built from the store (failed ones stay failed)."""
    if (stored.stats or {}).get("status") == "failed":
        return Follower(stored, None)
    try:
        # unseeded: its draws must be independent of the logged ones they are compared with
        learner_config = challenger_config(config, stored.definition).updated(seed=None)
        return Follower(stored, build_learner(learner_config, state))
    except Exception as exc:
        return Follower(stored, None, f"could not be built: {type(exc).__name__}: {exc}")


def _record(ctx: WorkerContext, ref: ModelRef, champion_stats: dict[str, Any],
            held: ModelChallengers, value_rates: tuple[Rates, str | None]) -> None:
    """The champion's and each challenger's value as gauges, and whether they can be stood
    behind: as ``GET .../challengers`` shows them (:func:`~app.evaluation.running.shown_value`
    at the rates read by :func:`~app.store.values.read_value_rates`)."""
    m = ctx.metrics
    rates, reason = value_rates
    m.set_interval(m.champion_value, (*ref,), shown_value(champion_stats, rates).champion)
    m.set_reason(m.challenger_values_unreliable, (*ref,), reason, UNRELIABLE_REASONS)
    for name, follower in held.followers.items():
        value = shown_value(follower.stored.stats, rates)
        m.set_interval(m.challenger_value, (*ref, name), value.snips)
        m.set_interval(m.challenger_vs_champion, (*ref, name), value.vs_champion)


FEATURE = Feature("challengers", state_factory=Following, after_publish=after_publish)
