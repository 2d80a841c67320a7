"""Simulated feedback: true bandit clicks and their noisy, flipped versions (P1 §3, P2 §2)."""

from __future__ import annotations

import numpy as np


def set_contains(played: np.ndarray, y: np.ndarray) -> np.ndarray:
    """True click: 1.0 where the true label ``y`` is the played label or in the played set.

    ``played`` has shape ``(n,)`` (one label per round, bandit feedback
    ``I[played = y]``) or ``(n, m)`` (one set per round, dilute feedback
    ``I[y in set]``); ``y`` has shape ``(n,)``.  A single round (``played``
    scalar or ``(m,)`` with scalar ``y``) works too.

    >>> set_contains(np.array([[0, 2], [1, 3]]), np.array([2, 0]))
    array([1., 0.])
    """
    played_arr = np.asarray(played)
    y_arr = np.asarray(y)
    if played_arr.ndim == y_arr.ndim:
        return np.asarray(played_arr == y_arr, dtype=np.float64)
    if played_arr.ndim != y_arr.ndim + 1:
        raise ValueError(f"played shape {played_arr.shape} does not fit labels {y_arr.shape}")
    return np.asarray((played_arr == y_arr[..., None]).any(axis=-1), dtype=np.float64)


def noisy_clicks(true_click: np.ndarray, rho0: float, rho1: float,
                 rng: np.random.Generator) -> np.ndarray:
    """Flip true 0/1 clicks: 0 -> 1 with probability ``rho0``, 1 -> 0 with ``rho1``.

    Class-independent noise of P1 Section 3: ``rho0 = P(f_rho = 1 | f = 0)``,
    ``rho1 = P(f_rho = 0 | f = 1)``.  Returns float64 0/1 of the same shape.
    One uniform draw per click, so the same seed gives the same flips.
    """
    f = np.asarray(true_click, dtype=np.float64)
    for name, rate in (("rho0", rho0), ("rho1", rho1)):
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"{name} must lie in [0, 1), got {rate!r}")
    if not np.all((f == 0.0) | (f == 1.0)):
        raise ValueError("true clicks must be 0 or 1")
    flip_prob = np.where(f == 1.0, rho1, rho0)
    flip = rng.random(f.shape) < flip_prob
    return np.where(flip, 1.0 - f, f)
