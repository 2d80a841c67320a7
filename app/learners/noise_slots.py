"""Examination and click noise per slot of a ranking, from its own randomised placements.

Model (trust bias, Agarwal et al. WWW 2019, *Addressing Trust Bias for
Unbiased Learning-to-Rank*; Vardasbi et al. CIKM 2020, *When Inverse Propensity
Scoring does not Work: Affine Corrections for Unbiased Learning to Rank*): an
item shown in slot ``k`` with true relevance ``R`` in {0, 1} is clicked with
probability

    P(f = 1 | k, R) = theta_k (R (1 - rho1) + (1 - R) rho0_k) = beta_k + alpha_k R,   (1)

``theta_k`` the examination probability (``theta_0 = 1``), ``rho1`` the chance
an examined relevant item is not clicked, ``rho0_k`` the chance an examined
irrelevant item is clicked in slot ``k`` (trust bias: higher on top), so that
``u_k = theta_k (1 - rho1)`` and ``v_k = beta_k = theta_k rho0_k`` are the click
rates of relevant and irrelevant items in slot ``k`` and ``alpha_k = u_k - v_k``.
Vardasbi et al. show that dividing clicks by ``theta_k`` (inverse propensity
scoring) is biased under (1) and that the affine correction
``(f - beta_k) / alpha_k`` is unbiased for ``R``: these ``alpha_k, beta_k`` are
what a learner needs (:meth:`SlotEstimate.affine`).

**Bands.**  Each logged row (slot, placement probability, the score the item
was placed with, click) falls in a score band: the ``bottom_fraction`` lowest
scores, the ``top_fraction`` highest, and the rows between (quantiles of the
scores of the newest ``recent_fraction`` of the rows, the ones used).  Items of
one band reach different slots because the policy randomises its placements
(the intervention harvesting of Agarwal et al. WSDM 2019, with the score band in
place of the query-document pair; ``ridge_pl``'s ``anchor_share`` shows the
least confident items in every slot); rows placed with probability 1 (a
caller's ranking followed) are left out, and an estimate without randomised
rows is refused.

**Anchor assumption.**  The model's most confident items are relevant and its
least confident are not, *in every slot*: ``R = 1`` in the top band and
``R = 0`` in the bottom band, whichever slot they are shown in.  Then by (1)
the click rates of the two anchor bands in slot ``k`` are ``u_k`` and ``v_k``,
estimated by their shares of clicks (independent binomials), and

    theta_k = u_k / u_0,   rho1 = 1 - u_0,   rho0_k = v_k / theta_k.             (2)

``rho1`` takes ``u_0`` from the top :data:`RHO1_FRACTION` of the scores only (in
slot 0, which holds most of them): under graded relevance the top 20% band is
not all relevant (0.97 on the rank benchmark's stream) and ``1 - u_0`` counted
its irrelevant share as lost clicks (``rho1`` 0.314-0.354 for 0.3, outside its
interval); the top 5% is nearer all relevant, at about twice the width.

The rows between the anchors are not used.  A score band there has a share
``g`` of relevant items and, by (1), the click rate ``v_k + (u_k - v_k) g`` in
slot ``k``, but ``g`` is not the same in every slot: which items reach a slot
depends on the other candidates of their request, not only on their own score
(on :mod:`app.sim.trust`'s stream, the first band above the bottom anchor is
more often relevant in slot 2 than in slot 0), and a ``g`` shared by the slots
would count those extra relevant clicks as ``v_k``.  With ``g`` free per slot
and band, such a band adds nothing to ``(u_k, v_k)``.

**Intervals.**  Each anchor rate's binomial variance (of the rate
``(clicks + 1) / (rows + 2)``, so that a cell without clicks keeps a width) and
the delta method through (2) give a standard error per parameter; each interval
is ``estimate +- z se`` (``z`` of the two-sided ``level``), clipped to ``[0, 1]``,
but for ``rho0_k = v_k / theta_k``: ``v_k`` is small in the lower slots (0.021 in
slot 2 of the trust stream, about 10 clicks of 475 rows), where ``v_k +- z se``
undercovers on the high side (5 clicks read ``rho0_2`` 0.027 [0, 0.055] for 0.06),
so each side of its interval is that of ``v_k``'s score interval (:func:`wilson`)
over ``theta_k``, combined with ``theta_k``'s error (:func:`_rate_over_theta`).

**The low end of each ``rho0_k`` interval.**  Under graded relevance no item is surely
irrelevant, so the bottom band holds a few relevant items whose clicks read as part of
``v_k``, and so of ``rho0_k``; with ``rho0_k`` free per slot nothing in the clicks tells
the two apart, and the check below sees it only where relevance rises across the band.
They can only raise ``v_k``: the band's interval keeps its high end, and its low end may
be too high.  Relevance rises with the score, so the narrower the band the fewer: on the
rank benchmark's 50-candidate stream the lowest 3% of scores were 0.3-1.5% relevant
(``rho0_0`` about half its standard error high; its interval held 0.03 on 6 of 8
published seeds) and the lowest 1% 0.1-0.3%.  So each interval's low end is the lower
of the band's and that of the narrowest band of ``bottom_fraction`` times
:data:`BOTTOM_STEPS` that keeps the interval at most ``max_width`` wide
(:func:`_bottom_low`): the width the caller allows goes to the side the bias is on, the
estimate and whether it is published are the band's, and where the band is all
irrelevant (binary relevance) the interval is only wider.  ``bottom_fraction`` reports,
per slot, the band the low end came from.

**When the anchors fail.**  If the top band's items are not all relevant
(graded relevance: no item surely relevant) or the bottom band's are not all
irrelevant, (2) is biased and the two rates alone do not show it.  What does
show it is relevance still rising *within* an anchor band: the upper half of the
band (by score) gets a share ``g`` of relevant items above the lower half's.
Both halves' ``g`` are fitted given ``(u, v)``; if the difference exceeds
``flat_tolerance`` by more than ``z`` standard errors (one-sided, at ``level``)
in either anchor band, the estimate is refused (:data:`ANCHOR_NOT_FLAT`).  The
default tolerance is 0: with 0.01, graded relevance whose top band is 0.98
relevant (the rank benchmark's 50-candidate stream) passed and published a
``rho1`` about 0.03 high with intervals 0.02 wide; at 0 a stream whose anchors
hold is refused about one estimate in seven by chance (one-sided 95% in each
band), which the next estimate, 2,500 rows later, undoes.  A
stream whose best items all share one relevance below 1 (a plateau that is not
1) cannot be told from clicks; that limit is the assumption's.

**Publishing** (the rule of :func:`app.learners.noise_anchor.estimate_from_anchors`):
published only when every interval (``theta_k`` for ``k >= 1``, ``rho0_k``,
``rho1``) is at most ``max_width`` wide, both anchor bands hold at least
``min_events`` rows and every slot at least ``min_events`` (and each anchor band
some rows in every slot); otherwise
``insufficient_data`` with the reason and the counts.

**Examination has its own gate** (``theta_published``).  ``theta_k = u_k / u_0``
needs less than (2) does: only that the top band's items reaching slot ``k`` are
as often relevant as those reaching slot 0, not that they are all relevant.  If
a share ``g < 1`` of them is (graded relevance), ``u_k = theta_k (g (1 - rho1) +
(1 - g) rho0_k)`` and the ratio is off by a factor ``1 + (1 - g)(rho0_k -
rho0_0) / (g (1 - rho1) + (1 - g) rho0_0)`` (under 0.01 at ``g = 0.95`` on the
trust stream), while ``rho1 = 1 - u_0`` is off by ``(1 - g)(1 - rho1 - rho0_0)``
(0.03 there: about the interval's whole width).  So ``theta`` is published when
every ``theta_k`` interval is at most ``max_width`` wide (the counts as above),
whatever the click-noise parameters' widths and the flatness check say; the
rates and the affine correction wait for the whole rule.  A ``u_k`` rests on the
top band's rows in slot ``k``, few in the lower slots (the policy puts its best
items on top), so ``theta`` is fitted on every row of the buffer
(``theta_fraction`` 1), the rates on the newest ``recent_fraction`` (0.7:
there the least confident items are surely irrelevant; on every row the bottom
band of an 8-candidate stream held relevant items and ``rho0_k`` read up to 3
times its truth), and ``rho0_k = v_k / theta_k`` takes that ``theta_k``.

*Comparable items.*  One top band over the whole buffer does not hold items equally
relevant in every slot: the scorer's scale grows as it learns, so the newest rows
fill most of the band, down to items that were ranked second or third, and those
that reach the lower slots are less often relevant than those in slot 0 (on the
default 8-candidate stream, seed 8: 0.94 in slot 1 and 0.90 in slot 2 against 0.98,
and ``theta_1`` read 0.575 [0.549, 0.601] for 0.617; the 3 examination misses of
``bench/bench_noise_slots.py --part publish`` on the graded worlds were all such).
So ``theta_k`` is the Mantel-Haenszel ratio of slot ``k``'s click rate to slot 0's
over strata of comparable items
(:func:`_examination`): ``theta_chunks`` consecutive chunks of the rows (one
scorer each, about), each chunk's own top ``top_fraction`` of scores cut into
``theta_bins`` score quantiles.  On those streams the same ratio of the items' true
relevance, 0.90-0.97 pooled, was 0.99-1.00 over the strata, at the price of a
standard error 1.1-1.4 times the pooled ratio's.  What the strata cannot
remove (relevance that differs by slot among items of one score of one scorer)
is not seen by the estimate.  ``bench/bench_noise_slots.py --part publish``
measures both gates.

Cost: a few passes over the rows (sorts for the quantiles, one per chunk).  Pure numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from app.learners.base import ParamError, check_int, check_range
from app.learners.noise_anchor import INTERVAL_TOO_WIDE, TOO_FEW_EVENTS

#: Reason: no row was placed at random (probability below 1).
NOT_RANDOMISED = "no_randomised_placements"
#: Reason: relevance still rises within an anchor band (module docstring).
ANCHOR_NOT_FLAT = "anchor_not_flat"
#: Reason: in some slot the top band is not clicked more often than the bottom band.
NO_FIT = "fit_failed"
#: Click rates are kept in ``[EDGE, 1 - EDGE]`` where they weigh a fit.
EDGE = 1e-6
#: Share of the highest scores whose slot-0 click rate gives ``rho1`` (module docstring).
RHO1_FRACTION = 0.05
#: Narrower bottom bands tried for the low end of ``rho0_k``'s interval, as shares of
#: ``bottom_fraction``, narrowest first (module docstring).
BOTTOM_STEPS = (1.0 / 3.0, 0.5, 2.0 / 3.0, 5.0 / 6.0)


@dataclass(frozen=True)
class SlotEstimate:
    """Per-slot examination and click noise, their intervals and what they rest on.

    Attributes
    ----------
    theta, rho0:
        Per slot (``theta[0] = 1``); NaN where no fit.
    rho1:
        Chance an examined relevant item is not clicked.
    theta_interval, rho0_interval:
        ``(slots, 2)`` arrays of ``(low, high)`` at confidence ``level``.
    rho1_interval:
        ``(low, high)``.
    level, published, reason:
        As for :class:`app.learners.noise_anchor.AnchorEstimate`.
    theta_published:
        Whether ``theta`` passes its own gate (module docstring): every ``theta_k``
        interval at most ``max_width`` wide; true whenever ``published`` is.
    max_width:
        The widest interval the estimate was allowed.
    n_events:
        Rows used (randomised, in the newest ``recent_fraction``).
    n_slot:
        Rows used per slot.
    n_top, n_bottom:
        Rows in the two anchor bands.
    flatness:
        ``g`` of the upper half less ``g`` of the lower half of the top and of
        the bottom band (0 when the anchors hold).
    bottom_fraction:
        Per slot, the share of the lowest scores whose rate gave the low end of the
        ``rho0_k`` interval (module docstring); empty when no rate was fitted.
    """

    theta: np.ndarray
    rho0: np.ndarray
    rho1: float
    theta_interval: np.ndarray
    rho0_interval: np.ndarray
    rho1_interval: tuple[float, float]
    level: float
    published: bool
    reason: str
    n_events: int
    n_slot: np.ndarray
    n_top: int
    n_bottom: int
    flatness: tuple[float, float]
    theta_published: bool = False
    max_width: float = 1.0
    bottom_fraction: tuple[float, ...] = ()

    @property
    def widths(self) -> np.ndarray:
        """Widest interval per slot over ``theta_k`` (``k >= 1``), ``rho0_k`` and ``rho1``."""
        width = np.maximum(self.theta_interval[:, 1] - self.theta_interval[:, 0],
                           self.rho0_interval[:, 1] - self.rho0_interval[:, 0])
        out: np.ndarray = np.maximum(width, self.rho1_interval[1] - self.rho1_interval[0])
        return out

    def param_widths(self) -> dict[str, np.ndarray]:
        """Per slot, the width of each parameter's interval (``theta_0`` is 1 exactly)."""
        return {"theta": self.theta_interval[:, 1] - self.theta_interval[:, 0],
                "rho0": self.rho0_interval[:, 1] - self.rho0_interval[:, 0],
                "rho1": np.full(self.theta.shape[0],
                                self.rho1_interval[1] - self.rho1_interval[0])}

    def too_wide(self) -> list[list[str]]:
        """Per slot, the parameters whose interval is wider than ``max_width``.

        >>> from app.sim.trust import simulated_placements
        >>> est = estimate_slot_noise(*simulated_placements(8_000, seed=0)[:4], 3)
        >>> est.reason, est.theta_published, est.too_wide()
        ('interval_too_wide', True, [['rho0'], ['rho0'], ['rho0']])
        """
        widths = self.param_widths()
        return [[name for name, w in widths.items() if w[k] > self.max_width]
                for k in range(self.theta.shape[0])]

    def affine(self) -> tuple[np.ndarray, np.ndarray]:
        """``(alpha_k, beta_k)`` of (1): relevance is ``(click - beta_k) / alpha_k`` on average."""
        return click_affine(self.theta, self.rho0, self.rho1)


def click_affine(theta: np.ndarray, rho0: np.ndarray, rho1: np.ndarray | float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha_k, beta_k)`` of (1), ``alpha = theta (1 - rho0 - rho1)`` and
    ``beta = theta rho0``, element-wise: the one formula every affine correction
    ``(click - beta_k) / alpha_k`` uses (learning, reporting, evaluating).

    >>> alpha, beta = click_affine(np.array([1.0, 0.5]), np.array([0.2, 0.1]), 0.1)
    >>> np.round(alpha, 6).tolist(), beta.tolist()
    ([0.7, 0.4], [0.2, 0.05])
    """
    theta, rho0 = np.asarray(theta, dtype=np.float64), np.asarray(rho0, dtype=np.float64)
    return theta * (1.0 - rho0 - rho1), theta * rho0


def bands_of(score: np.ndarray, top_fraction: float, bottom_fraction: float
             ) -> tuple[np.ndarray, np.ndarray]:
    """Band index of each score (0: bottom anchor, 1: between the anchors, 2: top anchor)
    and whether each row is in the upper half of its band (by score quantile).

    >>> band, upper = bands_of(np.arange(10.0), 0.2, 0.2)
    >>> band.tolist(), upper.tolist()[8:]
    ([0, 0, 1, 1, 1, 1, 1, 1, 2, 2], [False, True])
    """
    cuts = np.array([0.0, bottom_fraction, 1.0 - top_fraction, 1.0])
    band = np.searchsorted(np.quantile(score, cuts[1:3]), score, side="left").astype(np.intp)
    halves = np.quantile(score, (cuts[:-1] + cuts[1:]) / 2.0)
    return band, score > halves[band]


def anchor_rates(k: np.ndarray, f: np.ndarray, band: np.ndarray, m: int
                 ) -> tuple[np.ndarray, np.ndarray] | None:
    """``(u_k, v_k)``, the click rates of the top and bottom bands per slot, and the
    covariance of their estimates (diagonal: independent binomials, each variance that of
    the rate ``(clicks + 1) / (rows + 2)``); None when a slot lacks an anchor band's rows."""
    rates, variances = [], []
    for b in (2, 0):
        n = np.bincount(k[band == b], minlength=m).astype(np.float64)
        c = np.bincount(k[band == b], weights=f[band == b], minlength=m)
        if not n.all():
            return None
        smooth = (c + 1.0) / (n + 2.0)
        rates.append(c / n)
        variances.append(smooth * (1.0 - smooth) / n)
    return np.concatenate(rates), np.diag(np.concatenate(variances))


def estimate_slot_noise(
    slot: np.ndarray,
    prob: np.ndarray,
    score: np.ndarray,
    click: np.ndarray,
    slots: int,
    *,
    top_fraction: float = 0.2,
    bottom_fraction: float = 0.03,
    recent_fraction: float = 0.7,
    theta_fraction: float = 1.0,
    level: float = 0.95,
    max_width: float = 0.1,
    min_events: int = 100,
    flat_tolerance: float = 0.0,
    theta_chunks: int = 10,
    theta_bins: int = 5,
) -> SlotEstimate:
    """Estimate ``theta_k``, ``rho0_k`` and ``rho1`` with intervals (module docstring).

    Parameters
    ----------
    slot, prob, score, click:
        One entry per shown row, in the order shown: its slot (``0 .. slots - 1``), the
        probability its placement had given the slots before it, the score the
        item was placed with, and the click (0 or 1).
    slots:
        Number of slots ``m``.
    top_fraction, bottom_fraction:
        Shares of the rows in the top (assumed relevant) and bottom (assumed
        irrelevant) anchor bands.
    recent_fraction:
        Share of the rows, the newest, used for the rates (the model's scores are best
        there: its least confident items are then surely irrelevant).
    theta_fraction:
        Share of the rows, the newest, used for the examination (module docstring).
    level, max_width, min_events:
        Confidence level of the intervals, widest interval published, fewest
        rows per slot and per anchor band.
    flat_tolerance:
        Largest rise of ``g`` within an anchor band that is not taken as a
        failed anchor (module docstring).
    theta_chunks, theta_bins:
        Consecutive chunks of the rows and score bins of each chunk's top band: the
        strata of the examination's ratio (module docstring).

    Examples
    --------
    Placements of a scorer that ranks relevant items first, with softmax
    exploration over 6 candidates into 3 slots (true ``theta = (1, 0.6, 0.35)``,
    ``rho0 = (0.2, 0.12, 0.06)``, ``rho1 = 0.1``):

    >>> from app.sim.trust import simulated_placements
    >>> rows = simulated_placements(40_000, seed=0)
    >>> est = estimate_slot_noise(*rows[:4], 3)
    >>> est.published, np.round(est.theta, 2).tolist(), round(est.rho1, 2)
    (True, [1.0, 0.61, 0.35], 0.11)
    """
    m = check_int("slots", slots, 1, 100)
    q_top = check_range("top_fraction", top_fraction, 0.0, 0.5, low_open=True)
    q_bottom = check_range("bottom_fraction", bottom_fraction, 0.0, 0.5, low_open=True)
    recent = check_range("recent_fraction", recent_fraction, 0.0, 1.0, low_open=True)
    level = check_range("level", level, 0.0, 1.0, low_open=True, high_open=True)
    max_width = check_range("max_width", max_width, 0.0, 1.0, low_open=True)
    min_events = check_int("min_events", min_events, 1)
    flat_tolerance = check_range("flat_tolerance", flat_tolerance, 0.0, 1.0)
    theta_share = check_range("theta_fraction", theta_fraction, 0.0, 1.0, low_open=True)
    theta_chunks = check_int("theta_chunks", theta_chunks, 1)
    theta_bins = check_int("theta_bins", theta_bins, 1)
    k, p, s, f = _check_rows(slot, prob, score, click, m)
    start = k.shape[0] - math.ceil(theta_share * k.shape[0])
    keep = p[start:] < 1.0
    examination = _examination(k[start:][keep], s[start:][keep], f[start:][keep],
                               q_top, m, theta_chunks, theta_bins)
    start = k.shape[0] - math.ceil(recent * k.shape[0])
    keep = p[start:] < 1.0
    k, s, f = k[start:][keep], s[start:][keep], f[start:][keep]
    n = int(k.shape[0])
    n_slot = np.bincount(k, minlength=m)
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    if n == 0:
        return _unpublished(NOT_RANDOMISED, m, n, n_slot, 0, 0, level, max_width)
    band, upper = bands_of(s, q_top, q_bottom)
    n_top, n_bottom = int(np.count_nonzero(band == 2)), int(np.count_nonzero(band == 0))
    rates = anchor_rates(k, f, band, m)
    if min(n_top, n_bottom, int(n_slot.min())) < min_events or rates is None:
        return _unpublished(TOO_FEW_EVENTS, m, n, n_slot, n_top, n_bottom, level, max_width)
    params, cov = rates
    u, v = params[:m], params[m:]
    if not np.all(u > v):
        return _unpublished(NO_FIT, m, n, n_slot, n_top, n_bottom, level, max_width)
    flat = [_rise(k[band == b], f[band == b], upper[band == b], u, v, m) for b in (2, 0)]
    theta, rho0, rho1, se = _derived(u, v, cov)
    top0 = (s >= np.quantile(s, 1.0 - RHO1_FRACTION)) & (k == 0)
    if top0.any():
        c1, n1 = float(f[top0].sum()), float(np.count_nonzero(top0))
        smooth1 = (c1 + 1.0) / (n1 + 2.0)
        rho1, se[2][:] = 1.0 - c1 / n1, math.sqrt(smooth1 * (1.0 - smooth1) / n1)
    rho0_iv = _intervals(rho0, z * se[1])
    bottom_share = (q_bottom,) * m
    if examination is not None:
        theta, se[0] = examination
        rho0 = v / theta
        rho0_iv = _rate_over_theta(rho0, v, np.bincount(k[band == 0], minlength=m), theta,
                                   se[0], z)
        rho0_iv[:, 0], bottom_share = _bottom_low(rho0_iv, k, s, f, q_bottom, theta, se[0],
                                                  z, max_width)
    theta_iv = _intervals(theta, z * se[0])
    theta_iv[0] = 1.0
    rho1_iv = _intervals(np.array([rho1]), z * se[2][:1])[0]
    estimate = SlotEstimate(theta, rho0, rho1, theta_iv, rho0_iv,
                            (float(rho1_iv[0]), float(rho1_iv[1])),
                            level, False, "", n, n_slot, n_top, n_bottom,
                            (float(flat[0][0]), float(flat[1][0])), False, max_width,
                            bottom_share)
    z_one = NormalDist().inv_cdf(level)
    if any(rise - z_one * se_rise > flat_tolerance for rise, se_rise in flat):
        reason = ANCHOR_NOT_FLAT
    elif estimate.widths.max() > max_width:
        reason = INTERVAL_TOO_WIDE
    else:
        reason = ""
    theta_narrow = bool(estimate.param_widths()["theta"].max() <= max_width)
    return SlotEstimate(**{**estimate.__dict__, "published": not reason, "reason": reason,
                           "theta_published": theta_narrow})


def _check_rows(slot: np.ndarray, prob: np.ndarray, score: np.ndarray, click: np.ndarray,
                m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The four columns validated (:class:`ParamError` naming the column)."""
    k = np.asarray(slot)
    p, s, f = (np.asarray(c, dtype=np.float64) for c in (prob, score, click))
    n = k.shape[0] if k.ndim == 1 else -1
    if any(c.shape != (n,) for c in (k, p, s, f)):
        raise ParamError("columns", "slot, prob, score and click must be vectors of one length")
    if k.dtype.kind not in "iu" or (n and (k.min() < 0 or k.max() >= m)):
        raise ParamError("slot", f"must be integers in [0, {m})")
    if not np.all((p > 0.0) & (p <= 1.0)):
        raise ParamError("prob", "placement probabilities must lie in (0, 1]")
    if not np.isfinite(s).all():
        raise ParamError("score", "must be finite")
    if not np.all((f == 0.0) | (f == 1.0)):
        raise ParamError("click", "must be 0 or 1")
    return k.astype(np.intp), p, s, f


def _rise(k: np.ndarray, f: np.ndarray, upper: np.ndarray, u: np.ndarray, v: np.ndarray,
          m: int) -> tuple[float, float]:
    """``g`` of the upper half of a band less that of its lower half, given ``(u, v)``,
    and its standard error (each half's ``g`` is the weighted least-squares fit of
    ``p_k = v_k + (u_k - v_k) g`` over the slots)."""
    out = []
    for half in (upper, ~upper):
        n = np.bincount(k[half], minlength=m).astype(np.float64)
        c = np.bincount(k[half], weights=f[half], minlength=m)
        a = u - v
        p0 = np.clip(np.divide(c, n, out=v.copy(), where=n > 0), EDGE, 1.0 - EDGE)
        w = n * a * a / (p0 * (1.0 - p0))
        if w.sum() <= 0.0:
            return 0.0, math.inf
        g = float(np.sum(n * a * (c / np.maximum(n, 1.0) - v) / (p0 * (1.0 - p0))) / w.sum())
        out.append((g, 1.0 / float(w.sum())))
    return out[0][0] - out[1][0], math.sqrt(out[0][1] + out[1][1])


def _examination(k: np.ndarray, s: np.ndarray, f: np.ndarray, q_top: float, m: int,
                 chunks: int, bins: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``theta_k``, the Mantel-Haenszel ratio of slot ``k``'s top-band click rate to slot 0's
    over strata of comparable items, and its standard error; None when a slot's top band
    has no click (module docstring, *Comparable items*).

    The rows (in the order shown) are cut into ``chunks`` consecutive chunks; a chunk's top
    band is its own ``q_top`` highest scores, cut into ``bins`` score quantiles: one stratum
    ``s`` each.  With ``c_ks`` clicks on ``n_ks`` rows of slot ``k`` and ``N_s = n_ks +
    n_0s`` (Mantel & Haenszel 1959; the risk ratio's form, Rothman, Greenland & Lash,
    *Modern Epidemiology* 3rd ed., ch. 15),

        theta_k = sum_s c_ks n_0s / N_s / sum_s c_0s n_ks / N_s,

    and the variance of ``log theta_k`` is Greenland & Robins' (Biometrics 1985), valid
    for many sparse strata as for few large ones,

        sum_s (n_ks n_0s (c_ks + c_0s) - c_ks c_0s N_s) / N_s^2 / (R S),

    ``R`` and ``S`` the sums of the numerator and denominator.

    >>> k = np.tile([0, 1], 400); s = np.repeat(np.arange(400.0), 2)
    >>> f = (np.arange(800) % 4 != 3).astype(np.float64)  # slot 0 always, slot 1 half
    >>> theta, se = _examination(k, s, f, 0.5, 2, 2, 2)
    >>> theta.round(3).tolist(), bool(se[1] > 0)
    ([1.0, 0.5], True)
    """
    if k.shape[0] < chunks * bins:
        return None
    stratum = np.full(k.shape[0], -1, dtype=np.intp)
    for chunk, rows in enumerate(np.array_split(np.arange(k.shape[0]), chunks)):
        top = rows[s[rows] >= np.quantile(s[rows], 1.0 - q_top)]
        edges = np.quantile(s[top], np.linspace(0.0, 1.0, bins + 1)[1:-1])
        stratum[top] = chunk * bins + np.searchsorted(edges, s[top], side="left")
    top = stratum >= 0
    cells = stratum[top] * m + k[top]
    n = np.bincount(cells, minlength=chunks * bins * m).reshape(-1, m).astype(np.float64)
    c = np.bincount(cells, weights=f[top], minlength=chunks * bins * m).reshape(-1, m)
    if not c.sum(axis=0).all():
        return None
    total = n + n[:, :1]
    both = total > n  # strata holding rows of slot 0 and of slot k
    w = np.where(both, 1.0 / np.where(both, total, 1.0), 0.0)
    r = np.sum(c * n[:, :1] * w, axis=0)
    q = np.sum(c[:, :1] * n * w, axis=0)
    if not (r.all() and q.all()):
        return None
    p = np.sum((n * n[:, :1] * (c + c[:, :1]) - c * c[:, :1] * total) * w * w, axis=0)
    theta = r / q
    se = theta * np.sqrt(np.maximum(p, 0.0) / (r * q))
    theta[0], se[0] = 1.0, 0.0
    return theta, se


def _derived(u: np.ndarray, v: np.ndarray, cov: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """(2) and the delta-method standard errors ``(se_theta, se_rho0, se_rho1)``."""
    m = u.shape[0]
    theta = u / u[0]
    rho0 = v * u[0] / u
    rho1 = 1.0 - float(u[0])
    grads = np.zeros((3, m, cov.shape[0]))
    for k in range(m):
        if k:
            grads[0, k, k] = 1.0 / u[0]
            grads[0, k, 0] = -u[k] / u[0] ** 2
            grads[1, k, m + k] = u[0] / u[k]
            grads[1, k, 0] = v[k] / u[k]
            grads[1, k, k] = -v[k] * u[0] / u[k] ** 2
        else:
            grads[1, 0, m] = 1.0
        grads[2, k, 0] = -1.0
    se = np.sqrt(np.maximum(np.einsum("ski,ij,skj->sk", grads, cov, grads), 0.0))
    return theta, rho0, rho1, se


def wilson(rate: np.ndarray, n: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's score interval of binomial rates ``rate`` on ``n`` rows (Wilson 1927;
    Agresti & Coull 1998): ``(rate + z^2 / 2n +- z sqrt(rate (1 - rate) / n + z^2 / 4n^2))
    / (1 + z^2 / n)``; unlike ``rate +- z se`` it holds a rate near 0 (5 clicks of 475
    rows: [0.0045, 0.0244], the Wald interval [0.0013, 0.0197]).

    >>> [np.round(b, 4).tolist() for b in wilson(np.array([5 / 475]), np.array([475.0]), 1.96)]
    [[0.0045], [0.0244]]
    """
    n = np.asarray(n, dtype=np.float64)
    zz = z * z / n
    centre = rate + zz / 2.0
    half = z * np.sqrt(rate * (1.0 - rate) / n + zz / (4.0 * n))
    return (centre - half) / (1.0 + zz), (centre + half) / (1.0 + zz)


def _bottom_low(interval: np.ndarray, k: np.ndarray, s: np.ndarray, f: np.ndarray,
                q_bottom: float, theta: np.ndarray, se_theta: np.ndarray, z: float,
                max_width: float) -> tuple[np.ndarray, tuple[float, ...]]:
    """Per slot, the low end of the ``rho0_k`` interval (``interval``, of the whole bottom
    band ``q_bottom``) lowered to that of the narrowest band of ``q_bottom`` times
    :data:`BOTTOM_STEPS` (the rows whose score is at most that quantile;
    :func:`_rate_over_theta`) that keeps the interval at most ``max_width`` wide when that
    is lower, and the band the low end came from (module docstring).

    Two slots, clicked 0.05 of the time on the lowest 1% of 60,000 scores and 0.1 above
    (relevant items creeping in): the 3% band reads 0.083 [0.067, 0.103], the 1% band
    0.05; a narrower ``max_width`` stops at the 2.5% band:

    >>> k = np.tile([0, 1], 30_000); s = np.arange(60_000.0)
    >>> f = ((s % 40 < 2) | ((s >= 600) & (s % 40 < 4))).astype(np.float64)
    >>> one = np.ones(2); v = np.full(2, 75 / 900)  # 15 + 60 clicks of 900 rows per slot
    >>> iv = _rate_over_theta(v, v, np.full(2, 900.0), one, 0 * one, 1.96)
    >>> iv[0].round(3).tolist()
    [0.067, 0.103]
    >>> low, share = _bottom_low(iv, k, s, f, 0.03, one, 0 * one, 1.96, 0.1)
    >>> low.round(3).tolist(), share
    ([0.031, 0.031], (0.01, 0.01))
    >>> _bottom_low(iv, k, s, f, 0.03, one, 0 * one, 1.96, 0.04)[1]
    (0.025, 0.025)
    """
    m = theta.shape[0]
    out, share = interval[:, 0].copy(), np.full(m, q_bottom)
    done = np.zeros(m, dtype=bool)
    steps = q_bottom * np.array(BOTTOM_STEPS)
    for step, cut in zip(steps, np.quantile(s, steps), strict=True):
        bottom = s <= cut
        n = np.bincount(k[bottom], minlength=m).astype(np.float64)
        v = np.bincount(k[bottom], weights=f[bottom], minlength=m) / np.maximum(n, 1.0)
        low = _rate_over_theta(v / theta, v, np.maximum(n, 1.0), theta, se_theta, z)[:, 0]
        take = ~done & (n > 0) & (interval[:, 1] - np.minimum(low, out) <= max_width)
        lower = take & (low < out)
        out[lower], share[lower] = low[lower], step
        done |= take
    return out, tuple(round(float(q), 6) for q in share)


def _rate_over_theta(rho0: np.ndarray, v: np.ndarray, n: np.ndarray, theta: np.ndarray,
                     se_theta: np.ndarray, z: float) -> np.ndarray:
    """Interval of ``rho0_k = v_k / theta_k`` around ``rho0``: each side of ``v_k``'s score
    interval (:func:`wilson`) over ``theta_k``, combined in quadrature with ``theta_k``'s
    error, ``z rho0_k se(theta_k) / theta_k`` (the delta method), clipped to [0, 1]."""
    low, high = wilson(v, n, z)
    spread = z * rho0 * se_theta / theta
    return np.stack((np.maximum(rho0 - np.hypot((v - low) / theta, spread), 0.0),
                     np.minimum(rho0 + np.hypot((high - v) / theta, spread), 1.0)), axis=1)


def _intervals(centre: np.ndarray, half: np.ndarray) -> np.ndarray:
    return np.stack((np.maximum(centre - half, 0.0), np.minimum(centre + half, 1.0)), axis=1)


def _unpublished(reason: str, m: int, n: int, n_slot: np.ndarray, n_top: int, n_bottom: int,
                 level: float, max_width: float) -> SlotEstimate:
    nan = np.full(m, np.nan)
    unit = np.tile([0.0, 1.0], (m, 1))
    return SlotEstimate(nan, nan.copy(), math.nan, unit, unit.copy(), (0.0, 1.0), level, False,
                        reason, n, n_slot, n_top, n_bottom, (math.nan, math.nan), False,
                        max_width)
