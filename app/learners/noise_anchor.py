"""Click-noise rates from two anchors: uniform exploration and confident plays.

Setting (P1 Section 3): a played label ``a`` for input ``x`` is right
(``c = 1``) or wrong (``c = 0``), and the observed click ``f`` is ``c``
flipped with class-independent rates ``rho0 = P(f = 1 | c = 0)`` and
``rho1 = P(f = 0 | c = 1)``, so that for any set ``S`` of events chosen
without looking at their clicks

    E[f | S] = rho0 + beta P(c = 1 | S),     beta = 1 - rho0 - rho1.       (1)

Two sets whose ``P(c = 1 | S)`` is known give two linear equations in
``(rho0, rho1)``; no model of the clicks is needed beyond choosing the sets.

**Uniform anchor** (``P(c = 1) = 1/K`` exactly).  If every label can be
played (the policy gives it a positive propensity ``p_i`` of the played
label, logged at decision time), importance weights ``w_i = 1 / (K p_i)``
turn the logged plays into plays of the uniform policy: for each ``x``,
``E[w f | x] = (1/K) sum_a E[f | x, a] = rho0 + beta / K`` since the true
label is exactly one of the ``K``.  The self-normalised estimate

    m_u = sum_i w_i f_i / sum_i w_i   ->   rho0 + beta / K                 (2)

is consistent for any input distribution and any policy with full support
(with an epsilon-greedy or Banditron policy it is the click rate of the
uniformly drawn plays, all plays weighted by how likely the uniform policy
was to make them).  ``E[w] = 1`` under full support and ``(labels with
p > 0) / K`` otherwise, so the mean weight tells whether the anchor exists:
a deterministic policy (LinUCB without a uniform share) gives ``1/K`` and
the estimate is refused.

**Top anchor** (``P(c = 1) ~= 1``).  A scorer that learns ``E[f | x, a]``
(a per-label ridge regression of the clicks; the ridge learners are one)
ranks the plays by its margin, the predicted click rate of the played label
less the best of the other labels'; its *out-of-sample* margin of each play
(computed before the scorer learned that play, so the choice does not look
at the click) selects the ``top_fraction`` of the most recent
``recent_fraction`` of the plays, those it is most sure are right (the most
recent, because the scorer is best there).  If all of them are right, by (1)

    m_top = mean of f over the top plays   ->   1 - rho1.                  (3)

If a share ``delta`` of them are wrong, ``m_top`` is lower by ``beta delta``:
the one bias of the method, small when the scorer separates right from wrong
plays (measured in ``docs/results/noise.md``).  The margin rather than the
predicted rate itself, and the recent plays rather than all, each cut this
bias several-fold on digits (where labels resemble each other) in replay.
The defaults (the top 5% of the newest 60% of the plays) were chosen on
replays of SynSep-like and digits streams with seeds other than those of
``docs/results/noise.md``: a window of 50% left one run of 60 with an error
of 0.07 at 20,000 events, 60% none above 0.046.  A test of whether the click
rate still rises as the top set shrinks (its best half against the rest)
refused some estimates without removing the worst errors, so it is not used.

**Solution.**  From (2) and (3):

    rho1 = 1 - m_top,        rho0 = (K m_u - m_top) / (K - 1).             (4)

**Interval** (delta method, exact up to the self-normalisation because (4)
is linear).  Each event ``i`` has the influence values

    psi_u(i)   = w_i (f_i - m_u) / mean(w),
    psi_top(i) = 1[i in top] (f_i - m_top) / (n_top / n),

``Var(m_u) = mean(psi_u^2) / n``, ``Var(m_top) = mean(psi_top^2) / n``,
``Cov = mean(psi_u psi_top) / n`` (a top play can also be an explored one),
hence ``Var(rho1) = Var(m_top)`` and
``Var(rho0) = (K^2 Var(m_u) - 2 K Cov + Var(m_top)) / (K - 1)^2``.  The
interval is ``estimate +- z se`` with ``z`` the normal quantile of the
two-sided ``level``, clipped to ``[0, 1]``.  The default level is 0.95 per
rate, so that both intervals hold the true rates together with probability
at least 0.9 (Bonferroni): with 0.9 per rate the joint coverage in replay
was 84-86%, below the 90% the pair is read as.

**Discounting** (``half_life``).  So that a change in how people click is
followed, each play can weigh ``a_i = 2^(-age_i / half_life)`` by its age in
plays (the newest weighs 1): both anchors become weighted means
(``m_u = sum a w f / sum a w``, ``m_top`` the ``a``-weighted click rate of the
top plays) and the influence values take the weights (``psi_u(i) =
a_i w_i (f_i - m_u) / mean(a w)``, ``psi_top(i) = 1[i in top] a_i (f_i -
m_top) / (sum_top a / n)``), which is the delta method for a weighted mean;
with every ``a_i = 1`` they are the formulas above.  The old rates' share of
the estimate halves every ``half_life`` plays, at the price of wider
intervals: the effective number of plays is at most about ``2.9 half_life``.

**What the rates mean, and when they are identifiable.**  ``rho0`` is the
click rate of a play that is surely wrong and ``1 - rho1`` that of a play
that is surely right.  From clicks alone they are identifiable only under two
assumptions: (A) every input has exactly one right label (the right label may
be uncertain given ``x``, but the shares of right plays of the ``K`` labels
sum to one), which is what makes (2) hold; and (B) the scorer's most
confident plays are right (3).  In a *graded* world (labels that are each
right with some probability below one, e.g. three arms whose true click
rates are 0.2, 0.45 and 0.7) no play is surely right and (1) holds for many
``(rho0, rho1)``: ``rho0 + beta p`` with the true ``p`` and other rates with
another ``p`` give the same clicks, so the two anchors return rates that
mean nothing (``0.36, 0.42`` for ``0.1, 0.2`` in that world).  A world whose
best label is right with probability ``c < 1`` and the others never is the
one-right-label world with ``1 - rho1' = rho0 + beta c``: no estimator can
tell them apart, and the rates then mean "relative to the best label".

**Stated, not inferred.**  The check below sees a graded world only through
the clicks of the explored plays of its worst labels, which 30,000 plays of
a graded world do not always give it the power for (measured in
``docs/reliability.md``).  So (A) is a statement about the world, made by
the learner's setting (``one_right_label``: multi-class classification) or
by the model's owner: without it an estimate is refused with reason
:data:`ONE_RIGHT_UNSTATED` (``one_right_label=False``) whatever the clicks say
(its fields are still computed: :class:`AnchorEstimate`).

**Anchor check.**  What can be seen is a third anchor that (A) and (B)
predict: among the recent explored plays (propensity at most ``1/K``: uniform
draws, of which a share ``(K - 1) / K`` is wrong under (A), more when the
policy's own label is excluded from them), the ``bottom_fraction`` of that
wrong share with the *lowest* margins (the scorer is surest another label is
right) are surely wrong, so their click rate ``m_bot`` is ``rho0`` (under
(1), any set chosen without its clicks clicks at least ``rho0``).  The
disagreement

    D = rho0_hat - m_bot                                                    (5)

is at most 0 when the assumptions hold (0 when the bottom set is surely
wrong; right plays in it only raise ``m_bot``), so only a positive ``D``
contradicts them; in the graded world above it is about 0.05-0.1 (the rho0
of (4) is the mean click rate of the labels that are not the best, about
0.3, while the worst label clicks at 0.24 and less).  The bottom set is
drawn from the explored plays, and from the lower half of their wrong share,
because with few labels and little exploration the lowest 2% of *all* recent
margins held the explored plays of the middle labels as well as the worst
one's (0.2/0.45/0.7 world, seeds 0-9, 12 refreshes of 30,000 plays: 26 of
120 published with that set, 6 with this one), while the upper part of the
wrong share holds the right plays the scorer mis-ranks (a share of 0.6
published the 0.5/0.35/0.2/0.05 world in 20 of 120 refreshes, 0.5 in 7;
0.4 published the two graded worlds in 3 and 4, but the plays of the digits
replay with rates (0.3, 0.1) of ``tests/replay/test_noise_acceptance.py``
in only 2 of its 8 refreshes, not the last).  Checking (A) by the uniform
click rate instead (``m_u = rho0 + beta / K`` with ``rho0 = m_bot`` and
``1 - rho1 = m_top``) is this check rescaled: ``m_u - m_bot - (m_top -
m_bot) / K = (K - 1) / K D``.  Its standard error comes from the influence
values of the three anchors (``psi_D = (K psi_u - psi_top) / (K - 1)
- psi_bot``, ``psi_bot`` as ``psi_top`` on the bottom set).  Second, relevance
that still varies inside the top set (context-dependent graded relevance)
shows as a click rate that still rises with the score there: ``rise``, the
click rate of the top set's upper half (by score) less its lower half's.  An
estimate is refused with reason :data:`ANCHOR_NOT_FLAT` when either is shown
beyond its tolerance (``D - z se > agree_tolerance`` or ``rise - z se >
flat_tolerance``, ``z`` one-sided at ``level``), and with
:data:`ANCHOR_UNCHECKED` while the agreement cannot yet be shown within its
tolerance (``D + z se > agree_tolerance``): the burden of proof is on the
assumption, so a world where it fails is not published by chance before the
check has the power to see it.  The bottom set is a check only if the scorer's low
margins do pick out wrong plays: under (A) the rest of the wrong share holds
the right plays the scorer mis-ranks, so it clicks at least as often as the
bottom set; the estimate stays :data:`ANCHOR_UNCHECKED` while the bottom set
clicks above the rest by more than ``z`` standard errors (``drop + z se <
0``, ``drop`` the rest's click rate less the bottom set's).  Through the
service, the 0.2/0.45/0.7 world's shadow model, fitted on few explored plays
of the two labels not played greedily, gave its lowest margins to plays that
clicked 0.39 against the rest's 0.26 at 15,000 events (``D = -0.10``), and
published.

**Publishing.**  The estimate is published only when both intervals are at
most ``max_width`` wide, at least ``min_events`` plays are in the top set, in
the bottom set and were explored (propensity at most ``1/K``), the mean
weight is consistent with full support, and the anchor check passes;
otherwise the result is ``insufficient_data`` with the reason and the counts.  Point estimates are
clipped to ``[0, 1)`` and scaled so that ``beta >= beta_min``
(:func:`app.learners.noise.sanitise`); a raw estimate that needed this is
flagged in ``reason``.

:class:`ProgressiveScorer` gives the out-of-sample scores for any learner
(it learns the logged plays in blocks, scoring each block before learning
it), from the same diagonal ridge regression as ``linucb_diag``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from app.learners.base import ParamError, check_int, check_range
from app.learners.forgetting import check_half_life, decay, discount
from app.learners.noise import sanitise
from app.learners.ridge import LinUCBDiag

#: Reasons an estimate is not published.
NO_EXPLORATION = "no_uniform_exploration"
TOO_FEW_EVENTS = "too_few_events"
INTERVAL_TOO_WIDE = "interval_too_wide"
#: Reason: the anchors' assumptions are shown not to hold (module docstring, Anchor check).
ANCHOR_NOT_FLAT = "anchor_not_flat"
#: Reason: the anchors cannot yet be shown to agree within the tolerance.
ANCHOR_UNCHECKED = "anchor_unchecked"
#: Reason: nobody stated that every input has exactly one right label (module docstring).
ONE_RIGHT_UNSTATED = "one_right_label_unstated"


@dataclass(frozen=True)
class AnchorEstimate:
    """Noise rates from the two anchors, their intervals and what they rest on.

    Attributes
    ----------
    rho0, rho1:
        Sanitised point estimates (NaN when the anchors could not be formed).
    rho0_interval, rho1_interval:
        ``(low, high)`` at confidence ``level``, clipped to ``[0, 1]``.
    level:
        Two-sided confidence level of the intervals.
    published:
        Whether the estimate may be used (see the module docstring).
    reason:
        Why it is not published (:data:`ONE_RIGHT_UNSTATED`, :data:`NO_EXPLORATION`,
        :data:`TOO_FEW_EVENTS`, :data:`INTERVAL_TOO_WIDE`, :data:`ANCHOR_NOT_FLAT`,
        :data:`ANCHOR_UNCHECKED`), or ``"clipped"``
        when a published raw estimate was sanitised; empty otherwise.
    n_events:
        Plays the estimate used (all given).
    n_explored:
        Plays whose propensity was at most ``1/K`` (the uniform anchor's data).
    n_top:
        Plays in the top set (the top anchor's data).
    m_uniform, m_top:
        The anchors: click rate of the uniform policy and of the top plays.
    support:
        Mean importance weight (1 under full support).
    raw_rho0, raw_rho1:
        Estimates (4) before sanitising.
    n_bottom:
        Plays in the bottom set (the anchor check's data).
    disagreement, disagreement_se:
        ``D`` of (5) and its standard error.
    rise, rise_se:
        Click rate of the top set's upper half less its lower half's, and its standard
        error.
    drop, drop_se:
        Click rate of the rest of the explored plays' wrong share less the bottom set's,
        and its standard error.
    """

    rho0: float
    rho1: float
    rho0_interval: tuple[float, float]
    rho1_interval: tuple[float, float]
    level: float
    published: bool
    reason: str
    n_events: int
    n_explored: int
    n_top: int
    m_uniform: float
    m_top: float
    support: float
    raw_rho0: float
    raw_rho1: float
    n_bottom: int = 0
    disagreement: float = math.nan
    disagreement_se: float = math.nan
    rise: float = math.nan
    rise_se: float = math.nan
    drop: float = math.nan
    drop_se: float = math.nan

    @property
    def insufficient_data(self) -> bool:
        """Whether the estimate must not be used yet (the opposite of ``published``)."""
        return not self.published

    @property
    def widths(self) -> tuple[float, float]:
        """Widths of the two intervals."""
        return (self.rho0_interval[1] - self.rho0_interval[0],
                self.rho1_interval[1] - self.rho1_interval[0])


def check_columns(prob: np.ndarray, score: np.ndarray, click: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three columns as float arrays of one length, validated (:class:`ParamError`).

    ``prob`` in ``(0, 1]``, ``click`` in {0, 1}, ``score`` real or NaN (not
    eligible for the top set).
    """
    p = np.asarray(prob, dtype=np.float64)
    s = np.asarray(score, dtype=np.float64)
    f = np.asarray(click, dtype=np.float64)
    n = p.shape[0] if p.ndim == 1 else -1
    if p.shape != (n,) or s.shape != (n,) or f.shape != (n,):
        raise ParamError("columns", f"prob, score and click must be vectors of one length, "
                                    f"got {p.shape}, {s.shape}, {f.shape}")
    if not np.all((p > 0.0) & (p <= 1.0)):
        raise ParamError("prob", "propensities must lie in (0, 1]")
    if not np.all((f == 0.0) | (f == 1.0)):
        raise ParamError("click", "must be 0 or 1")
    if np.any(np.isinf(s)):
        raise ParamError("score", "must be finite or NaN")
    return p, s, f


def age_weights(n: int, half_life: float | None) -> np.ndarray:
    """Weight of each of ``n`` plays in the order made: ``2^(-age / half_life)``, the newest 1
    (all 1 without a half-life).

    >>> age_weights(3, 1.0).tolist(), age_weights(2, None).tolist()
    ([0.25, 0.5, 1.0], [1.0, 1.0])
    """
    return decay(discount(half_life), np.arange(n - 1, -1, -1))


def top_set(score: np.ndarray, top_fraction: float, recent_fraction: float = 1.0
            ) -> np.ndarray:
    """Indices of the ``ceil(top_fraction * m)`` largest scores among the ``m`` non-NaN ones
    of the last ``ceil(recent_fraction * n)`` of the ``n`` plays.

    Ties at the threshold go to the earlier event (a stable sort).

    >>> top_set(np.array([0.2, np.nan, 0.9, 0.5, 0.9]), 0.5).tolist()
    [2, 4]
    >>> top_set(np.array([0.2, np.nan, 0.9, 0.5, 0.9]), 0.5, recent_fraction=0.4).tolist()
    [4]
    """
    start = score.shape[0] - math.ceil(recent_fraction * score.shape[0])
    eligible = start + np.flatnonzero(~np.isnan(score[start:]))
    k = math.ceil(top_fraction * eligible.size)
    order = np.argsort(-score[eligible], kind="stable")
    return np.sort(eligible[order[:k]])


def bottom_set(prob: np.ndarray, score: np.ndarray, n_classes: int, bottom_fraction: float,
               recent_fraction: float = 1.0) -> np.ndarray:
    """Indices of the ``ceil(bottom_fraction (K - 1) / K m)`` lowest scores among the ``m``
    explored (propensity at most ``1/K``), scored plays of the last
    ``ceil(recent_fraction * n)``: the lowest-scored ``bottom_fraction`` of the share of
    uniformly drawn plays that are wrong under (A) (module docstring, Anchor check).

    Ties at the threshold go to the earlier event (a stable sort).

    >>> prob, score = np.array([0.5, 0.5, 1.0, 0.5, 0.5]), np.array([0.3, 0.1, -1.0, 0.2, 0.0])
    >>> bottom_set(prob, score, 2, 1.0).tolist()
    [1, 4]
    """
    n = score.shape[0]
    start = n - math.ceil(recent_fraction * n)
    explored = start + np.flatnonzero((prob[start:] <= (1.0 + 1e-9) / n_classes)
                                      & ~np.isnan(score[start:]))
    k = math.ceil(bottom_fraction * (n_classes - 1) / n_classes * explored.size)
    return np.sort(explored[np.argsort(score[explored], kind="stable")[:k]])


def band_mean(a: np.ndarray, f: np.ndarray, band: np.ndarray) -> tuple[float, np.ndarray]:
    """The ``a``-weighted click rate of the plays ``band`` and its influence values over all
    ``n`` plays (``psi(i) = 1[i in band] a_i (f_i - m) n / sum_band a``).

    >>> m, psi = band_mean(np.ones(4), np.array([1.0, 0.0, 1.0, 1.0]), np.array([0, 1]))
    >>> m, psi.tolist()
    (0.5, [1.0, -1.0, 0.0, 0.0])
    """
    n = a.shape[0]
    m = float(a[band] @ f[band] / a[band].sum())
    psi = np.zeros(n)
    psi[band] = a[band] * (f[band] - m) * (n / a[band].sum())
    return m, psi


def top_rise(a: np.ndarray, f: np.ndarray, score: np.ndarray, top: np.ndarray
             ) -> tuple[float, float]:
    """Click rate of the upper half (by score) of the ``top`` plays less that of the lower
    half, ``a``-weighted, and its standard error (the halves are independent sets)."""
    order = top[np.argsort(score[top], kind="stable")]
    halves = (order[order.size // 2:], order[:order.size // 2])
    if min(h.size for h in halves) == 0:
        return 0.0, math.inf
    means, variances = [], []
    for half in halves:
        m, psi = band_mean(a, f, half)
        means.append(m)
        variances.append(float(psi @ psi) / a.shape[0] ** 2)
    return means[0] - means[1], math.sqrt(sum(variances))


def estimate_from_anchors(
    prob: np.ndarray,
    score: np.ndarray,
    click: np.ndarray,
    n_classes: int,
    *,
    top_fraction: float = 0.05,
    recent_fraction: float = 0.6,
    level: float = 0.95,
    max_width: float = 0.1,
    min_events: int = 100,
    beta_min: float = 0.1,
    half_life: float | None = None,
    bottom_fraction: float = 0.5,
    agree_tolerance: float = 0.065,
    flat_tolerance: float = 0.05,
    bottom_score: np.ndarray | None = None,
    one_right_label: bool = True,
) -> AnchorEstimate:
    """Estimate ``(rho0, rho1)`` with intervals from logged plays (module docstring).

    Parameters
    ----------
    prob:
        Propensity of each played label at decision time, in ``(0, 1]``.
    score:
        Out-of-sample score of each play (e.g. :class:`ProgressiveScorer`), NaN
        for plays not eligible for the top set (scored before the scorer had
        learned enough).
    click:
        Observed noisy click of each play, 0 or 1.
    n_classes:
        Number of labels ``K``.
    top_fraction:
        Share of the eligible recent plays in the top set, in ``(0, 1]``.
    recent_fraction:
        Share of the plays, the most recent, the top set is chosen from, in
        ``(0, 1]`` (the arrays are in the order the plays were made).
    level:
        Two-sided confidence level of the intervals, in ``(0, 1)``.
    max_width:
        Widest interval (of either rate) still published, in ``(0, 1]``.
    min_events:
        Fewest explored plays and fewest top plays to publish, ``>= 1``.
    beta_min:
        Floor on ``1 - rho0 - rho1`` of the published rates, in ``(0, 1)``.
    half_life:
        Plays after which a play weighs half in both anchors (``Discounting``
        in the module docstring); None weighs every play alike.
    bottom_fraction:
        Share of the recent explored plays that are wrong under (A), those with the lowest
        scores, in the bottom set of the anchor check, in ``(0, 1]`` (:func:`bottom_set`).
    agree_tolerance, flat_tolerance:
        Largest disagreement ``D`` of (5) and largest rise of the click rate inside
        the top set taken as anchors that hold (module docstring, Anchor check).
    bottom_score:
        Scores that rank the explored plays for the bottom set and the rest of the wrong
        share (:func:`bottom_set`), one per play, NaN for plays not eligible; None: ``score``
        (the service's).  Other rankings of the explored plays are measured in
        ``bench/bench_noise_graded_checks.py``.
    one_right_label:
        Whether every input is stated to have exactly one right label (assumption (A));
        False refuses the estimate with :data:`ONE_RIGHT_UNSTATED` (module docstring,
        Stated, not inferred).

    Examples
    --------
    A uniformly random policy over 4 labels, a scorer that knows which plays
    are right, rates (0.2, 0.3):

    >>> rng = np.random.default_rng(0)
    >>> n, K = 40_000, 4
    >>> right = rng.random(n) < 1 / K
    >>> click = np.where(right, rng.random(n) > 0.3, rng.random(n) < 0.2).astype(float)
    >>> score = right + rng.random(n)
    >>> est = estimate_from_anchors(np.full(n, 1 / K), score, click, K)
    >>> est.published, abs(est.rho0 - 0.2) < 0.05, abs(est.rho1 - 0.3) < 0.05
    (True, True, True)
    >>> est.rho1_interval[1] - est.rho1_interval[0] < 0.1
    True

    Not stated, the same plays give the same values, unpublished:

    >>> same = estimate_from_anchors(np.full(n, 1 / K), score, click, K, one_right_label=False)
    >>> same.published, same.reason, same.rho0 == est.rho0
    (False, 'one_right_label_unstated', True)
    """
    K = check_int("n_classes", n_classes, 2)
    q = check_range("top_fraction", top_fraction, 0.0, 1.0, low_open=True)
    recent = check_range("recent_fraction", recent_fraction, 0.0, 1.0, low_open=True)
    level = check_range("level", level, 0.0, 1.0, low_open=True, high_open=True)
    max_width = check_range("max_width", max_width, 0.0, 1.0, low_open=True)
    min_events = check_int("min_events", min_events, 1)
    beta_min = check_range("beta_min", beta_min, 0.0, 1.0, low_open=True, high_open=True)
    half_life = check_half_life(half_life)
    q_bottom = check_range("bottom_fraction", bottom_fraction, 0.0, 1.0, low_open=True)
    agree_tolerance = check_range("agree_tolerance", agree_tolerance, 0.0, 1.0)
    flat_tolerance = check_range("flat_tolerance", flat_tolerance, 0.0, 1.0)
    p, s, f = check_columns(prob, score, click)
    b = s if bottom_score is None else check_columns(p, bottom_score, f)[1]
    n = p.shape[0]
    top = top_set(s, q, recent)
    bottom = bottom_set(p, b, K, q_bottom, recent)
    n_explored = int(np.count_nonzero(p <= (1.0 + 1e-9) / K))
    if n == 0 or top.size == 0:
        return _unpublished(TOO_FEW_EVENTS if one_right_label else ONE_RIGHT_UNSTATED, n,
                            n_explored, int(top.size), level)

    w = 1.0 / (K * p)
    support = float(w.mean())
    a = age_weights(n, half_life)
    aw = a * w
    m_u = float(aw @ f / aw.sum())
    m_top, psi_top = band_mean(a, f, top)
    # without explored plays there is no bottom set: refused below, for want of exploration
    m_bot, psi_bot = band_mean(a, f, bottom) if bottom.size else (math.nan, np.zeros(n))
    rest = np.setdiff1d(bottom_set(p, b, K, 1.0, recent), bottom)
    m_rest, psi_rest = band_mean(a, f, rest) if rest.size else (math.nan, np.zeros(n))
    psi_u = aw * (f - m_u) / aw.mean()
    var_u, var_top = psi_u @ psi_u / n**2, psi_top @ psi_top / n**2
    cov = psi_u @ psi_top / n**2
    raw_rho1 = 1.0 - m_top
    raw_rho0 = (K * m_u - m_top) / (K - 1)
    se1 = math.sqrt(var_top)
    se0 = math.sqrt(max(K * K * var_u - 2.0 * K * cov + var_top, 0.0)) / (K - 1)
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    rho0, rho1 = sanitise(raw_rho0, raw_rho1, beta_min)
    se_w = float(w.std()) / math.sqrt(n)
    disagreement = raw_rho0 - m_bot
    psi_d = (K * psi_u - psi_top) / (K - 1) - psi_bot
    se_d = math.sqrt(float(psi_d @ psi_d)) / n
    rise, se_rise = top_rise(a, f, s, top)
    drop = m_rest - m_bot
    se_drop = math.sqrt(float(psi_rest @ psi_rest + psi_bot @ psi_bot)) / n
    z_one = NormalDist().inv_cdf(level)

    if not one_right_label:
        reason = ONE_RIGHT_UNSTATED
    elif support < 1.0 - 3.0 * se_w - 0.02:
        reason = NO_EXPLORATION
    elif min(n_explored, top.size, bottom.size) < min_events:
        reason = TOO_FEW_EVENTS
    elif (disagreement - z_one * se_d > agree_tolerance
          or rise - z_one * se_rise > flat_tolerance):
        reason = ANCHOR_NOT_FLAT
    elif 2.0 * z * max(se0, se1) > max_width:
        reason = INTERVAL_TOO_WIDE
    elif disagreement + z_one * se_d > agree_tolerance or drop + z_one * se_drop < 0.0:
        reason = ANCHOR_UNCHECKED
    elif (rho0, rho1) != (raw_rho0, raw_rho1):
        reason = "clipped"
    else:
        reason = ""
    return AnchorEstimate(
        rho0=rho0, rho1=rho1,
        rho0_interval=_interval(raw_rho0, z * se0), rho1_interval=_interval(raw_rho1, z * se1),
        level=level, published=reason in ("", "clipped"), reason=reason,
        n_events=n, n_explored=n_explored, n_top=int(top.size), m_uniform=m_u, m_top=m_top,
        support=support, raw_rho0=raw_rho0, raw_rho1=raw_rho1, n_bottom=int(bottom.size),
        disagreement=disagreement, disagreement_se=se_d, rise=rise, rise_se=se_rise,
        drop=drop, drop_se=se_drop,
    )


def _interval(centre: float, half: float) -> tuple[float, float]:
    return max(centre - half, 0.0), min(centre + half, 1.0)


def _unpublished(reason: str, n: int, n_explored: int, n_top: int,
                 level: float) -> AnchorEstimate:
    nan = math.nan
    return AnchorEstimate(nan, nan, (0.0, 1.0), (0.0, 1.0), level, False, reason, n,
                          n_explored, n_top, nan, nan, nan, nan, nan)


class ProgressiveScorer:
    """Out-of-sample margins of logged plays from a per-label ridge regression of the clicks.

    The regression is :class:`~app.learners.ridge.LinUCBDiag`'s (diagonal
    ridge, ``ridge`` relative to the mean ``||x||^2``), whose predicted click
    rates ``mu_b(x)`` give each play ``(x, a)`` the margin
    ``mu_a(x) - max_{b != a} mu_b(x)``.  :meth:`score_and_learn` scores a block
    of plays with the weights learned so far, then learns the block, so no
    play is scored by a model that saw its click (progressive validation).
    Plays scored before ``burn_in`` plays were learned get NaN (not eligible
    for the top set).  Run over a learner's stream in the order the events
    arrive, it uses ``linucb_diag``'s own predicted means; for any other
    learner it is the ridge model fitted on the logged plays that the top
    anchor needs.  Memory ``2 K d`` floats; time ``O(K d)`` per play.

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of labels ``K``.
    ridge:
        Ridge strength relative to the running mean of ``||x||^2``.
    burn_in:
        Plays learned before scores count, ``>= 0``.
    """

    def __init__(self, n_features: int, n_classes: int, *, ridge: float = 0.5,
                 burn_in: int = 1000) -> None:
        self.model = LinUCBDiag(n_features=n_features, n_classes=n_classes, ridge=ridge,
                                half_life=None)
        self.burn_in = check_int("burn_in", burn_in, 0)

    @property
    def learned(self) -> int:
        """Plays learned so far."""
        return self.model.count_

    def score_and_learn(self, X: np.ndarray, played: np.ndarray, click: np.ndarray
                        ) -> np.ndarray:
        """Margin of each play before learning the block (module docstring), then learn it.

        A play whose margin is not finite, or whose update would make the
        regression's state non-finite (inputs of extreme scale: the ridge is
        relative to the mean ``||x||^2``), scores NaN and only the latter is
        left unlearned, so that no single play can corrupt the scorer.
        """
        X = np.asarray(X, dtype=np.float64)
        played = np.asarray(played, dtype=np.intp)
        click = np.asarray(click, dtype=np.float64)
        rows = np.arange(played.shape[0])
        with np.errstate(over="ignore", invalid="ignore"):
            mean = X @ self.model.weights_.T
            scores: np.ndarray = mean[rows, played].copy()
            mean[rows, played] = -np.inf
            scores -= mean.max(axis=1)
        scores[~np.isfinite(scores)] = np.nan
        if self.learned < self.burn_in:
            scores[:] = np.nan
        if not self._learn_finite(X, played, click):
            for i in rows:  # isolate the plays that overflow
                if not self._learn_finite(X[i:i + 1], played[i:i + 1], click[i:i + 1]):
                    scores[i] = np.nan
        return scores

    def _learn_finite(self, X: np.ndarray, played: np.ndarray, click: np.ndarray) -> bool:
        """Learn the plays if the state stays finite; else leave it as it was (False)."""
        before = self.model.get_state()
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            self.model.learn_many({"x": X, "played": played, "click": click})
        if all(np.all(np.isfinite(arr)) for arr in self.model.get_state().values()):
            return True
        self.model.set_state(before)
        return False
