"""One rule for every click-noise estimate: when it is due, how it runs, when it is published.

The service's jobs role (its periodic refresh and ``POST .../noise/estimate``)
and ``noisyloop replay`` run a model's estimator through these functions, so
that an estimate is published by the same rule whatever asked for it:

* ``anchor`` (:func:`anchor_estimate`): on the newest :data:`ANCHOR_BUFFER`
  observed plays, due every :data:`ANCHOR_EVERY` new plays; published only
  when both 95% intervals are at most ``max_width`` wide, the anchors rest
  on enough plays and their assumption of one right label per input is stated
  (:func:`app.learners.noise_anchor.estimate_from_anchors`).
  For a learner that logs its placements (``logs_placements``: rank models) it
  is the per-slot estimate (:func:`slot_estimate`,
  :func:`app.learners.noise_slots.estimate_slot_noise`) on the newest
  :data:`SLOT_BUFFER` shown slots, published when every interval is at most
  ``max_width`` wide, its examination ``theta`` alone when its intervals are
  (:func:`replaces_slots`);
* ``nrest`` (:func:`nrest_estimate`): the paper's NREst on the model's sample
  buffer, due when the buffer has been renewed; published when the fit
  succeeds.  NREst gives no interval, so its estimates are published without
  one;
* ``fixed``: never estimated.

:func:`outcome` says what either estimate means for someone who may act on
it: ``published`` or ``insufficient_data``, the reason, the counts and the
interval (JSON-ready); :func:`position_bias` is the position bias a rank model
shows wherever it is shown, from the same per-slot estimate.

**Withdrawal** (:func:`withdraws`).  An estimate refused because its
assumptions are shown not to hold, cannot be shown to hold or are no longer
stated (:data:`WITHDRAWING`: ``anchor_not_flat``, ``anchor_unchecked``,
``one_right_label_unstated``), withdraws the
estimate published before it: the rates stay in use (the learner keeps learning
with them: changing its input each time the check's verdict flips would undo
what it learned) but every number they calibrate is flagged
``calibration_unreliable`` until a later estimate is published.  A refusal for
want of data (``too_few_events``, ``interval_too_wide``, ...) leaves the
published estimate in force: more data is what it waits for, not a sign that
the estimate was wrong.  Pure numpy: no Redis, no HTTP.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from app.learners.base import Learner
from app.learners.noise import NoiseEstimate, estimate_noise_rates
from app.learners.noise_anchor import (
    ANCHOR_NOT_FLAT,
    ANCHOR_UNCHECKED,
    ONE_RIGHT_UNSTATED,
    AnchorEstimate,
    estimate_from_anchors,
)
from app.learners.noise_slots import SlotEstimate, estimate_slot_noise

#: Anchor rows kept per model (the newest; 12 bytes each) and read by an estimate.
ANCHOR_BUFFER = 50_000
#: Shown slots kept per model that logs placements (30,000 requests of 3 slots).
SLOT_BUFFER = 90_000
#: New observed plays that make an anchor estimate due.
ANCHOR_EVERY = 2_500
#: beta_min of the learners that take no such parameter (the ridge bandits).
DEFAULT_BETA_MIN = 0.1
#: Widest interval (of either rate) an anchor estimate may have to be published, unless the
#: model sets its own ``max_width``.
DEFAULT_MAX_WIDTH = 0.1
#: NREst samples kept per model whose learner sets no buffer size of its own (``n_s``).
DEFAULT_NREST_BUFFER = 5_000
#: Estimators that re-estimate the rates (``fixed`` never does).
ESTIMATING = ("anchor", "nrest")
#: Reasons of a refused estimate that withdraw a published one (module docstring): its
#: assumptions are shown not to hold, cannot be shown to hold, or are no longer stated (the
#: per-slot estimate's ``anchor_not_flat`` is the same string).
WITHDRAWING = (ANCHOR_NOT_FLAT, ANCHOR_UNCHECKED, ONE_RIGHT_UNSTATED)


def beta_min(params: Mapping[str, Any]) -> float:
    """Floor on ``1 - rho0 - rho1`` of a model's estimates: its ``beta_min`` param, else
    :data:`DEFAULT_BETA_MIN`."""
    return float(params.get("beta_min", DEFAULT_BETA_MIN))


def anchor_due(new_plays: int, stale: bool) -> bool:
    """Whether an anchor estimate is due: :data:`ANCHOR_EVERY` new plays, or some new plays
    and the refresh interval has passed (``stale``)."""
    return new_plays > 0 and (new_plays >= ANCHOR_EVERY or stale)


def anchor_estimate(prob: np.ndarray, score: np.ndarray, click: np.ndarray, n_classes: int,
                    params: Mapping[str, Any], *, one_right_label: bool,
                    max_width: float = DEFAULT_MAX_WIDTH,
                    half_life: float | None = None) -> AnchorEstimate:
    """The anchor estimate of a model with hyper-parameters ``params`` from its plays in the
    order they were made (the newest :data:`ANCHOR_BUFFER` are used, each weighing half
    after ``half_life`` newer ones; None: alike); published only if ``one_right_label``
    (every input has exactly one right label) is stated, by the learner's setting or the
    model's owner (:meth:`~app.learners.config.ModelConfig.one_right_label`)."""
    return estimate_from_anchors(prob[-ANCHOR_BUFFER:], score[-ANCHOR_BUFFER:],
                                 click[-ANCHOR_BUFFER:], n_classes, max_width=max_width,
                                 beta_min=beta_min(params), half_life=half_life,
                                 one_right_label=one_right_label)


def pack_slots(slot: np.ndarray, click: np.ndarray) -> np.ndarray:
    """One number per shown slot for the anchor rows' click column: ``click + 2 slot``
    (exact in float32 for any slot count a model has; :func:`unpack_slots` inverts it).

    >>> unpack_slots(pack_slots(np.array([0, 2]), np.array([1.0, 0.0])))
    (array([0, 2]), array([1., 0.]))
    """
    return np.asarray(click, dtype=np.float64) + 2.0 * np.asarray(slot)


def unpack_slots(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(slot, click)`` of :func:`pack_slots`'s numbers."""
    slot = np.floor(np.asarray(packed, dtype=np.float64) / 2.0).astype(np.intp)
    return slot, packed - 2.0 * slot


def slot_estimate(prob: np.ndarray, score: np.ndarray, packed: np.ndarray,
                  max_width: float = DEFAULT_MAX_WIDTH) -> SlotEstimate:
    """The per-slot estimate from the newest :data:`SLOT_BUFFER` shown slots (packed by
    :func:`pack_slots`, in the order shown) whose feedback was a click, 0 or 1 (graded
    rewards carry no click-noise information), for the slots they were shown in."""
    slot, click = unpack_slots(packed[-SLOT_BUFFER:])
    binary = (click == 0.0) | (click == 1.0)
    slots = int(slot.max()) + 1 if slot.size else 1
    return estimate_slot_noise(slot[binary], prob[-SLOT_BUFFER:][binary],
                               score[-SLOT_BUFFER:][binary], click[binary], slots,
                               max_width=max_width)


def nrest_estimate(X: np.ndarray, played: np.ndarray, clicks: np.ndarray, n_classes: int,
                   params: Mapping[str, Any], *, seed: int,
                   previous: tuple[float, float]) -> NoiseEstimate:
    """NREst of a model with hyper-parameters ``params`` (its ``percentile`` and
    ``beta_min``) on its sample buffer; ``previous`` are kept when the fit fails."""
    return estimate_noise_rates(X, played, clicks, n_classes,
                                percentile=params.get("percentile"),
                                beta_min=beta_min(params), seed=seed, previous=previous)


def slots_outcome(est: SlotEstimate) -> list[dict[str, Any]]:
    """Per slot: ``slot``, ``theta``, ``rho0``, ``rho1``, their ``interval``, which of them
    are ``published`` (examination has its own gate), their ``widths``, the ones
    ``too_wide`` to publish and the ``bottom_fraction`` of the scores whose rate gave the
    low end of ``rho0``'s interval (JSON-ready).

    >>> from app.sim.trust import simulated_placements
    >>> est = estimate_slot_noise(*simulated_placements(20_000, seed=1)[:4], 3)
    >>> [sorted(row) for row in slots_outcome(est)][0]  # doctest: +NORMALIZE_WHITESPACE
    ['bottom_fraction', 'interval', 'published', 'rho0', 'rho1', 'slot', 'theta',
     'too_wide', 'widths']
    """
    rho1 = float(est.rho1)
    widths, too_wide = est.param_widths(), est.too_wide()
    published = {"theta": est.theta_published, "rho0": est.published, "rho1": est.published}
    return [{"slot": k, "theta": float(est.theta[k]), "rho0": float(est.rho0[k]), "rho1": rho1,
             "interval": {"theta": [float(v) for v in est.theta_interval[k]],
                          "rho0": [float(v) for v in est.rho0_interval[k]],
                          "rho1": list(est.rho1_interval)},
             "published": dict(published),
             "widths": {name: float(w[k]) for name, w in widths.items()},
             "too_wide": too_wide[k],
             "bottom_fraction": est.bottom_fraction[k] if est.bottom_fraction else None}
            for k in range(est.theta.shape[0])]


def replaces_slots(est: SlotEstimate, in_force_published: bool) -> bool:
    """Whether the per-slot estimate ``est`` becomes the one in force: published whole, or
    its examination alone while the one in force (``in_force_published``: published
    whole) is not."""
    return est.published or (est.theta_published and not in_force_published)


def position_bias(cls: type[Learner], params: Mapping[str, Any],
                  slots: Sequence[Mapping[str, Any]] | None) -> tuple[list[float], str]:
    """The position bias per slot a model of learner class ``cls`` with ``params`` shows,
    and its source, given the per-slot estimate in force (``slots`` of its noise record,
    :func:`slots_outcome`): that estimate's ``theta`` (``estimated``), else what the class
    shows without one (:meth:`~app.learners.base.Learner.position_bias_prior`:
    ``configured`` or ``insufficient_data``).

    >>> from app.learners.rank import RidgeRanker
    >>> position_bias(RidgeRanker, {"slots": 2}, [{"theta": 1.0}, {"theta": 0.6}])
    ([1.0, 0.6], 'estimated')
    >>> position_bias(RidgeRanker, {"slots": 2}, None)
    ([1.0, 1.0], 'insufficient_data')
    """
    if slots:
        return [float(s["theta"]) for s in slots], "estimated"
    values, source = cls.position_bias_prior(params)
    return list(values), source


def outcome(est: AnchorEstimate | NoiseEstimate | SlotEstimate) -> dict[str, Any]:
    """What an estimate says, JSON-ready: ``status`` (``published`` or
    ``insufficient_data``), ``reason``, the rates (None unless published), the counts and
    the ``interval`` (``level`` and both bounds; None for NREst, which has none).

    >>> from app.learners.noise_anchor import estimate_from_anchors
    >>> est = estimate_from_anchors(np.full(10, 0.5), np.zeros(10), np.ones(10), 2)
    >>> out = outcome(est)
    >>> out["status"], out["reason"], out["rho0"], out["n_events"]
    ('insufficient_data', 'too_few_events', None, 10)
    """
    if isinstance(est, SlotEstimate):
        published = est.published
        return {
            "estimator": "anchor",
            "status": "published" if published else "insufficient_data",
            "reason": est.reason,
            "rho0": float(est.rho0[0]) if published else None,
            "rho1": est.rho1 if published else None,
            "n_events": est.n_events, "n_explored": None, "n_top": est.n_top,
            "n_bottom": est.n_bottom,
            "interval": {"level": est.level,
                         "rho0": [float(v) for v in est.rho0_interval[0]] if published else None,
                         "rho1": list(est.rho1_interval) if published else None},
            "theta_published": est.theta_published,
            "slots": slots_outcome(est) if np.isfinite(est.theta).all() else None,
        }
    if isinstance(est, AnchorEstimate):
        published = est.published
        return {
            "estimator": "anchor",
            "status": "published" if published else "insufficient_data",
            "reason": est.reason,
            "rho0": est.rho0 if published else None,
            "rho1": est.rho1 if published else None,
            "n_events": est.n_events, "n_explored": est.n_explored, "n_top": est.n_top,
            "interval": {"level": est.level,
                         "rho0": list(est.rho0_interval) if published else None,
                         "rho1": list(est.rho1_interval) if published else None},
        }
    return {
        "estimator": "nrest",
        "status": "published" if est.ok else "insufficient_data",
        "reason": est.reason,
        "rho0": est.rho0 if est.ok else None,
        "rho1": est.rho1 if est.ok else None,
        "n_events": est.n_samples, "n_explored": None, "n_top": None, "interval": None,
    }


def withdraws(out: Mapping[str, Any]) -> bool:
    """Whether the :func:`outcome` ``out`` withdraws the estimate published before it: it
    was refused for a reason of :data:`WITHDRAWING` (module docstring, Withdrawal).

    >>> withdraws({"status": "insufficient_data", "reason": "anchor_not_flat"})
    True
    >>> withdraws({"status": "insufficient_data", "reason": "interval_too_wide"})
    False
    """
    return out["status"] != "published" and out.get("reason") in WITHDRAWING


def shows_published(outcomes: Sequence[Mapping[str, Any]]) -> list[bool]:
    """After each of a model's successive estimates (:func:`outcome`), whether the rates in
    use are a published estimate, not withdrawn: one was published, and no estimate since
    then :func:`withdraws` it.

    >>> shows_published([{"status": "published"}, {"status": "insufficient_data",
    ...     "reason": "interval_too_wide"}, {"status": "insufficient_data",
    ...     "reason": "anchor_unchecked"}, {"status": "published"}])
    [True, True, False, True]
    """
    shown, out = False, []
    for est in outcomes:
        shown = est["status"] == "published" or (shown and not withdraws(est))
        out.append(shown)
    return out


def rate_errors(last: Mapping[str, Any] | None, rho0: float, rho1: float
                ) -> tuple[float, float] | None:
    """Standard errors of the rates in force ``(rho0, rho1)`` when they are the published
    estimate of the :func:`outcome` ``last``: each interval's half-width over its ``z``;
    None when unknown (NREst gives no interval, or ``last`` is not the estimate in force).

    >>> last = {"status": "published", "rho0": 0.1, "rho1": 0.2,
    ...         "interval": {"level": 0.95, "rho0": [0.05, 0.15], "rho1": [0.1, 0.3]}}
    >>> [round(se, 4) for se in rate_errors(last, 0.1, 0.2)]
    [0.0255, 0.051]
    """
    if not last or last.get("status") != "published" or not last.get("interval"):
        return None
    interval = last["interval"]
    if not (interval.get("rho0") and interval.get("rho1")) or not all(
            math.isclose(last[k], v, abs_tol=1e-12) for k, v in (("rho0", rho0), ("rho1", rho1))):
        return None
    z = NormalDist().inv_cdf(0.5 + interval["level"] / 2.0)
    low0, high0 = interval["rho0"]
    low1, high1 = interval["rho1"]
    return (high0 - low0) / (2.0 * z), (high1 - low1) / (2.0 * z)
