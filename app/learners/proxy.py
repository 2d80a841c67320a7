"""Unbiased proxy for noisy clicks and validation of click-noise rates (P1 §3, Lemma 1, eq. (4)).

A click ``f`` in {0, 1} is observed through class-independent noise:
``rho0 = P(f_rho = 1 | f = 0)`` (false "correct") and
``rho1 = P(f_rho = 0 | f = 1)`` (false "wrong"), with
``beta = 1 - rho0 - rho1 > 0``.  Lemma 1 of P1 gives the proxy

    h(f_rho) = (f_rho - rho0) / (1 - rho0 - rho1),

i.e. ``h(1) = (1 - rho0) / beta`` and ``h(0) = -rho0 / beta``, with
``E[h | f = 0] = 0`` and ``E[h | f = 1] = 1``.  Every noise-aware learner
(RCNBF, RCINE, noise-corrected SOBA, the calibrated ridge learners) uses
these two functions.
"""

from __future__ import annotations

import logging
from typing import TypeVar

import numpy as np

from app.learners.base import ParamError, check_range

logger = logging.getLogger(__name__)

#: Smallest ``beta = 1 - rho0 - rho1`` accepted by default.  ``|h| <= 1/beta``
#: and the update of a played row grows like ``K / (gamma * beta)`` (P1 Lemma 3),
#: so a beta near 0 is refused rather than allowed to blow up the weights.
BETA_FLOOR = 0.01

#: Below this ``beta`` the rates are accepted but a warning is logged.
BETA_WARN = 0.05

#: Below this ``beta`` a calibrated probability is flagged as unreliable: dividing by
#: ``beta`` multiplies every error of the predicted observed rate by more than 5.
CALIBRATION_BETA_MIN = 0.2

F = TypeVar("F", float, np.ndarray)


def unbiased_click(f: F, rho0: float, rho1: float) -> F:
    """The proxy ``h(f) = (f - rho0) / (1 - rho0 - rho1)`` (P1 Lemma 1), scalar or vectorised.

    Rates are assumed valid (see :func:`check_noise_rates`).

    >>> unbiased_click(np.array([0.0, 1.0]), 0.2, 0.4)
    array([-0.5,  2. ])
    >>> unbiased_click(1.0, 0.0, 0.0)
    1.0
    """
    return (f - rho0) / (1.0 - rho0 - rho1)


def calibrated_probability(f: float, rho0: float, rho1: float) -> float:
    """``h(f)`` of a predicted observed click rate ``f``, clipped to ``[0, 1]``.

    A probability, unlike ``h`` of single clicks (whose mean is unbiased only
    unclipped).

    >>> calibrated_probability(0.9, 0.2, 0.4), calibrated_probability(0.1, 0.2, 0.4)
    (1.0, 0.0)
    """
    return clip_probability(unbiased_click(f, rho0, rho1))


def clip_probability(p: float) -> float:
    """``p`` clipped to ``[0, 1]``.

    >>> clip_probability(-0.25), clip_probability(0.5), clip_probability(8.75)
    (0.0, 0.5, 1.0)
    """
    return min(max(p, 0.0), 1.0)


def calibration_unreliable(rho0: float, rho1: float, reliable: bool = True) -> bool:
    """Whether a probability calibrated with the rates means little: the rates are not
    ``reliable`` (initial rates awaiting an estimate), or ``beta = 1 - rho0 - rho1`` is below
    :data:`CALIBRATION_BETA_MIN`.

    >>> calibration_unreliable(0.1, 0.2), calibration_unreliable(0.45, 0.4)
    (False, True)
    >>> calibration_unreliable(0.1, 0.2, reliable=False)
    True
    """
    return not reliable or 1.0 - rho0 - rho1 < CALIBRATION_BETA_MIN


def check_noise_rates(rho0: float, rho1: float, beta_min: float = BETA_FLOOR
                      ) -> tuple[float, float]:
    """Validate click-noise rates and return them as floats.

    Each rate must lie in ``[0, 1)`` and ``beta = 1 - rho0 - rho1`` must be at
    least ``beta_min`` (P1 Algorithm 1 needs ``beta > 0``); a ``beta`` below :data:`BETA_WARN`
    is accepted with a logged warning.  Raises :class:`ParamError` naming
    ``rho0`` or ``rho1``.

    >>> check_noise_rates(0.2, 0.4)
    (0.2, 0.4)
    >>> check_noise_rates(0.5, 0.5)
    Traceback (most recent call last):
    ...
    app.learners.base.ParamError: rho1: 1 - rho0 - rho1 must be >= 0.01, got 0
    """
    r0 = check_range("rho0", rho0, 0.0, 1.0, high_open=True)
    r1 = check_range("rho1", rho1, 0.0, 1.0, high_open=True)
    beta = 1.0 - r0 - r1
    if not beta >= beta_min:
        raise ParamError("rho1", f"1 - rho0 - rho1 must be >= {beta_min}, got {beta:.6g}")
    if beta < BETA_WARN:
        logger.warning("noise rates rho0=%s rho1=%s leave beta=%.3g: updates are scaled "
                       "by up to 1/beta", r0, r1, beta)
    return r0, r1
