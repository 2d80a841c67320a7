"""Linear Thompson sampling on the diagonal ridge regression (``lints_diag``, optional).

Thompson sampling (Agrawal & Goyal 2013) draws a model from the posterior and
plays its best label.  With the diagonal model of
:class:`~app.learners.ridge.DiagRidge` the sampled score of label ``a`` is
Gaussian, ``N(mean_a(x), (v width_a(x))^2)``, independently across labels,
so TS plays ``a`` with probability

    p_a = P(a has the largest sampled score)
        = E_z[ prod_{b != a} Phi((mean_a + v width_a z - mean_b) / (v width_b)) ],  z ~ N(0, 1).

This learner computes ``p`` by Gauss-Hermite quadrature and draws the label
from ``p`` (probability matching): the same action distribution as sampling
the scores, up to the quadrature error, but with a propensity that is exactly
the probability of the draw, so it can be logged as ``prob`` for off-policy
evaluation.  ``p`` gives labels far behind the best probability 0; on a
``uniform_share`` of the rounds the label is drawn uniformly instead (as
:class:`~app.learners.ridge.LinUCBDiag` does), so that every label keeps a
known positive propensity.
"""

from __future__ import annotations

import numpy as np

from app.learners.base import Decision, ParamError, check_int, check_non_negative
from app.learners.ridge import DiagRidge, check_uniform_share, with_uniform_share

#: Gauss-Hermite nodes and weights for the standard normal (weights sum to 1).
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(32)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def normal_cdf(u: np.ndarray) -> np.ndarray:
    """Standard normal CDF, ``(1 + erf(u / sqrt 2)) / 2``, erf by Abramowitz & Stegun 7.1.26.

    Absolute error below ``1e-7``; numpy has no ``erf`` and learners stay numpy-only.

    >>> normal_cdf(np.array([-1.0, 0.0, 1.96])).round(4)
    array([0.1587, 0.5   , 0.975 ])
    """
    v = np.abs(u) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * v)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                                                       + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-v * v)
    out: np.ndarray = 0.5 * (1.0 + np.sign(u) * erf)
    return out


def thompson_probabilities(mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``P(a = argmax_b S_b)`` for independent ``S_b ~ N(mean_b, scale_b^2)`` (module formula).

    Gauss-Hermite quadrature with 32 nodes, then normalised to sum to 1.
    Scales are floored at ``1e-12`` times the largest (or ``1e-12``), so equal
    means with zero scale share the probability.  Labels whose score cannot
    come within 8 standard deviations of the best (``mean_a + 8 s_a <
    max_b mean_b - 8 s_b``, probability below ``1e-15``) get probability 0
    and are left out of the products.  Time and memory ``O(C^2)`` for ``C``
    remaining contenders (at most ``K``).

    >>> thompson_probabilities(np.array([0.0, 0.0]), np.array([1.0, 1.0])).round(6)
    array([0.5, 0.5])
    >>> thompson_probabilities(np.array([1.0, 0.0]), np.array([1e-3, 1e-3])).round(6)
    array([1., 0.])
    """
    s_all = np.maximum(scale, 1e-12 * max(float(scale.max()), 1.0))
    live = np.flatnonzero(mean + 8.0 * s_all >= (mean - 8.0 * s_all).max())
    m, s = mean[live], s_all[live]
    # u[a, b, i] = (m_a + s_a z_i - m_b) / s_b
    u = (m[:, None, None] + s[:, None, None] * _NODES - m[None, :, None]) / s[None, :, None]
    cdf = normal_cdf(u)
    c = live.shape[0]
    cdf[np.arange(c), np.arange(c)] = 1.0
    p_live = np.prod(cdf, axis=1) @ _WEIGHTS
    p = np.zeros(mean.shape[0])
    p[live] = p_live / p_live.sum()
    return p


class LinTSDiag(DiagRidge):
    """Thompson sampling on a per-arm diagonal ridge regression (``lints_diag``).

    The posterior of arm ``a``'s weights is taken as
    ``N(weights_[a], v^2 diag(P_a))`` with the diagonal inverse precision
    ``P_a`` of :class:`~app.learners.ridge.DiagRidge`; the played label is
    drawn from the probabilities that each label's sampled score is the
    largest (:func:`thompson_probabilities`, module docstring), mixed with
    the uniform distribution on a ``uniform_share`` of the rounds, and that
    probability is logged as ``prob``.  ``explore=False`` plays the greedy
    label with probability 1.0.  Clicks are learned raw (see
    :mod:`app.learners.ridge` for the noise handling).

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of labels ``K`` (``K <= max_classes``:
        the probabilities cost ``O(K^2)`` per decision).
    seed:
        Seed of the generator drawing the played label.
    scale:
        ``v``, the posterior scale on the click scale.  Larger values explore
        more; 0 is greedy.  Values 0.2 to 0.5 suit 0/1 clicks (the residual
        standard deviation of a click is at most 0.5).
    ridge:
        Ridge strength relative to the running mean of ``||x||^2``
        (:class:`~app.learners.ridge.DiagRidge`).
    max_classes:
        Largest ``n_classes`` accepted.
    uniform_share:
        Share of the rounds, in ``[0, 1)``, whose label is drawn uniformly at
        random (the logged probability is the mixture's).  Thompson sampling
        gives labels far behind the best probability 0; these rounds give
        every label a known positive propensity, which the click-noise
        estimate is anchored on.  0 keeps pure Thompson sampling.
    half_life:
        Forgetting, in events: an event weighs half after ``half_life`` more
        events (:mod:`app.learners.forgetting`); null never forgets.
    rho0, rho1:
        Click-noise rates, used only to report ``expected_reward``; updated by
        :meth:`set_noise_rates`.

    Attributes
    ----------
    weights_, sum_x2_, sum_norm2_, count_:
        As in :class:`~app.learners.ridge.DiagRidge`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> protos = np.eye(3, 6) + 0.2
    >>> model = LinTSDiag(n_features=6, n_classes=3, seed=1)
    >>> mistakes = []
    >>> for t in range(1500):
    ...     y = int(rng.integers(3))
    ...     d = model.decide(protos[y] + 0.1 * rng.normal(size=6))
    ...     click = float(d.output["label"] == y)
    ...     mistakes.append(1.0 - click)
    ...     model.learn_one({**d.context, "click": click})
    >>> float(np.mean(mistakes[-500:])) < 0.1
    True
    """

    paper = (
        "Agrawal & Goyal 2013, *Thompson Sampling for Contextual Bandits with Linear "
        "Payoffs*, on a diagonal ridge regression (this project)"
    )

    def __init__(self, *, n_features: int, n_classes: int, seed: int | None = None,
                 scale: float = 0.3, ridge: float = 0.5, max_classes: int = 100,
                 uniform_share: float = 0.05, half_life: float | None = None,
                 rho0: float = 0.0, rho1: float = 0.0) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed,
                         rho0=rho0, rho1=rho1, ridge=ridge, half_life=half_life)
        self.scale = check_non_negative("scale", scale)
        self.max_classes = check_int("max_classes", max_classes, 2, 10_000)
        self.uniform_share = check_uniform_share(uniform_share)
        if self.n_classes > self.max_classes:
            raise ParamError("n_classes", f"lints_diag costs O(K^2) per decision; n_classes "
                             f"must be <= max_classes={self.max_classes}")

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """The distribution over labels the policy draws from for input ``x``."""
        mean, width = self._estimate(self._input(x))
        return self._policy(mean, width)

    def _policy(self, mean: np.ndarray, width: np.ndarray) -> np.ndarray:
        """Thompson sampling's distribution (the greedy label if ``scale`` is 0) mixed with
        ``uniform_share`` of the uniform one."""
        if self.scale == 0.0:
            p = np.zeros(self.n_classes)
            p[int(mean.argmax())] = 1.0
        else:
            p = thompson_probabilities(mean, self.scale * width)
        return with_uniform_share(p, self.uniform_share) if self.uniform_share else p

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        x = self._input(x, copy=True)
        mean, width = self._estimate(x)
        greedy = int(mean.argmax())
        if not explore or (self.scale == 0.0 and self.uniform_share == 0.0):
            return self._decision(x, mean, greedy, greedy, 1.0)
        return self._draw(x, mean, greedy, self._policy(mean, width))
