"""Regression streams with controlled label noise (Moroshko & Crammer §4).

A stream is ``(X, y)``: inputs ``(n, d)`` and the *clean* targets ``(n,)``
that the MSE is scored against.  The per-round noise variances come from
:func:`noise_variances` and the noisy labels from :func:`draw_labels`
(zero-mean Gaussian noise of the given variance; the paper only fixes the
variance).

* ``linear-gaussian``: ``x_t ~ N(0, I_d)``, ``y_t = x_tᵀu + n_t`` with
  ``u ~ N(0, I_d)`` and ``n_t ~ N(0, 0.01)``; ``d = 20``.
* ``channel``: the equaliser of the paper's Fig. 3.  ``s(t) ~ N(0, 1)`` is
  sent through the channel ``h = sinc(t)``, ``t = 0, 0.5, ..., 4.5`` (the
  normalised sinc ``sin(πt)/(πt)``, i.e. :func:`numpy.sinc`; the paper does
  not say which), plus ``n(t) ~ N(0, 4e-4)``.  The equaliser input is the 20
  most recent received samples ``(x(t), x(t-1), ..., x(t-19))`` and its
  target is ``s(t)`` (decision delay 0: this channel is minimum-phase, and
  the least-squares equaliser reaches MSE ~7e-4 at delay 0, within 10% of
  the best delay).
* a CSV file: numeric columns, the last one the target; a non-numeric first
  row is a header.  Rows are replayed in file order (repeated if needed).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

#: Names accepted by :func:`load_regression` (besides a CSV path).
REGRESSION_DATASETS: tuple[str, ...] = ("linear-gaussian", "channel")

#: Variance schedules of :func:`noise_variances` (paper §4.2); first is default.
NOISE_SCHEDULES: tuple[str, ...] = ("uniform", "increasing", "decreasing")

LINEAR_DIM = 20
LINEAR_NOISE_VAR = 0.01
CHANNEL_TAPS = np.sinc(np.arange(10) * 0.5)
CHANNEL_NOISE_VAR = 4e-4
EQUALISER_DIM = 20


def linear_gaussian(n: int, rng: np.random.Generator, d: int = LINEAR_DIM
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The paper's synthetic regression stream (§4.1): ``y = xᵀu + N(0, 0.01)``.

    >>> X, y = linear_gaussian(5, np.random.default_rng(0))
    >>> X.shape, y.shape
    ((5, 20), (5,))
    """
    u = rng.standard_normal(d)
    X = rng.standard_normal((n, d))
    y = X @ u + rng.normal(0.0, np.sqrt(LINEAR_NOISE_VAR), n)
    return X, y


def channel(n: int, rng: np.random.Generator, d: int = EQUALISER_DIM
            ) -> tuple[np.ndarray, np.ndarray]:
    """The equalisation stream of the paper's Fig. 3: received windows and sent symbols.

    Row ``t`` holds ``(x(t), x(t-1), ..., x(t-d+1))`` (zeros before the
    start) and the target is ``s(t)``.

    >>> X, y = channel(4, np.random.default_rng(0))
    >>> X.shape, bool(X[0, 0] != 0 and np.all(X[0, 1:] == 0))
    ((4, 20), True)
    """
    s = rng.standard_normal(n)
    received = np.convolve(s, CHANNEL_TAPS)[:n] + rng.normal(0.0, np.sqrt(CHANNEL_NOISE_VAR), n)
    padded = np.concatenate([np.zeros(d - 1), received])
    X = np.lib.stride_tricks.sliding_window_view(padded, d)[:, ::-1].copy()
    return X, s


def _numeric_row(row: list[str]) -> bool:
    """True when every cell of ``row`` parses as a float."""
    try:
        [float(c) for c in row]
    except ValueError:
        return False
    return True


def load_regression_csv(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a CSV whose columns are all numeric, the last one the target."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"data set {str(path)!r} is neither a known name "
                         f"{list(REGRESSION_DATASETS)} nor an existing CSV file")
    with p.open(newline="") as fh:
        rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    if rows and not _numeric_row(rows[0]):
        rows = rows[1:]
    if not rows or len(rows[0]) < 2:
        raise ValueError(f"CSV file {str(path)!r} needs data rows with >= 1 feature and a target")
    width = len(rows[0])
    try:
        data = np.array([[float(c) for c in r] for r in rows if len(r) == width])
    except ValueError as exc:
        raise ValueError(f"CSV file {str(path)!r}: non-numeric value ({exc})") from None
    if len(data) != len(rows):
        raise ValueError(f"CSV file {str(path)!r}: rows must all have {width} columns")
    if not np.all(np.isfinite(data)):
        raise ValueError(f"CSV file {str(path)!r}: non-finite values")
    return data[:, :-1], data[:, -1]


def load_regression(name: str, *, n: int = 10_000, seed: int = 0
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rounds of a named stream (generated from ``seed``) or of a CSV file.

    A CSV with fewer rows than ``n`` is repeated in file order; one with more
    is truncated.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    if name == "linear-gaussian":
        return linear_gaussian(n, rng)
    if name == "channel":
        return channel(n, rng)
    X, y = load_regression_csv(name)
    idx = np.arange(n) % len(y)
    return X[idx], y[idx]


def noise_variances(n: int, max_variance: float, rng: np.random.Generator,
                    schedule: str = "uniform") -> np.ndarray:
    """Per-round label-noise variances in ``[0, M]`` (paper §4.1-4.2).

    ``uniform``: i.i.d. ``U[0, M]``; ``increasing`` / ``decreasing``: linear
    from 0 to ``M`` / from ``M`` to 0 over the ``n`` rounds.
    """
    if not (np.isfinite(max_variance) and max_variance >= 0):
        raise ValueError(f"noise variance max must be finite and >= 0, got {max_variance}")
    if schedule == "uniform":
        return rng.uniform(0.0, max_variance, n)
    ramp = np.linspace(0.0, max_variance, n)
    if schedule == "increasing":
        return ramp
    if schedule == "decreasing":
        return ramp[::-1].copy()
    raise ValueError(f"noise schedule must be one of {list(NOISE_SCHEDULES)}, got {schedule!r}")


def draw_labels(target: float, variance: float, k: int, rng: np.random.Generator
                ) -> np.ndarray:
    """``k`` independent noisy labels ``target + N(0, variance)``."""
    return target + rng.normal(0.0, np.sqrt(variance), k)
