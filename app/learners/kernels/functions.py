"""Kernels and losses as the coefficient sequences of paper P5 (Sections 2 and 4.2, Appendix B).

A **dot-product kernel** is ``k(x, x') = Q(<x, x'>) = sum_n beta_n <x, x'>^n``
with ``beta_n >= 0``; its explicit feature map has level-``n`` coordinates
``sqrt(beta_n) x_k1 ... x_kn``.  The **Gaussian kernel**
``exp(-||x - x'||^2 / sigma2)`` has level-``n`` coordinates
``exp(-||x||^2/sigma2) c_n x_k1 ... x_kn`` with the *corrected* coefficient
``c_n = sqrt((2/sigma2)^n / n!)`` (P5 Appendix B; P5 omits the square root).

A **loss** has an analytic derivative ``l'(a) = sum_n gamma_n (a - c)^n``
(P5 Section 4.2, loss examples).  Regression losses are applied to
``<w, Psi(x)> - y``; classification losses to ``y <w, Psi(x)>`` with
``y in {-1, +1}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from app.learners.base import ParamError

#: Kernel names accepted by :func:`parse_kernel` (``poly`` and ``gaussian`` take a parameter).
KERNELS: tuple[str, ...] = ("linear", "poly:DEG", "exp", "gaussian:SIGMA2")
#: Loss names accepted by :func:`make_loss`.
LOSSES: tuple[str, ...] = ("squared", "exp", "smooth_abs", "smooth_hinge")
CLASSIFICATION_LOSSES = frozenset({"exp", "smooth_hinge"})


@dataclass(frozen=True)
class Kernel:
    """A dot-product kernel (``linear``, ``poly`` = ``(1 + z)^degree``, ``exp`` = ``e^z``)
    or the Gaussian kernel ``exp(-||x - x'||^2 / sigma2)``.

    >>> k = parse_kernel("gaussian:2")
    >>> a, b = np.array([0.3, -0.2]), np.array([0.1, 0.4])
    >>> series = sum(k.point_factor(a) * k.point_factor(b) * math.exp(2 * k.log_level_coef(n))
    ...              * float(a @ b) ** n for n in range(30))
    >>> bool(np.isclose(series, k(a[None], b)[0]))
    True
    """

    name: str
    degree: int = 1
    sigma2: float = 1.0

    @property
    def gaussian(self) -> bool:
        """Whether this is the Gaussian kernel (two orders per Map_Estimate)."""
        return self.name == "gaussian"

    @property
    def orders_per_map(self) -> int:
        """How many geometric orders one Map_Estimate draws: ``N`` or ``(N1, N2)``."""
        return 2 if self.gaussian else 1

    def log_level_coef(self, n: int) -> float:
        """``log`` of the level-``n`` feature coefficient: ``sqrt(beta_n)`` or ``c_n``;
        ``-inf`` when the level is absent (``beta_n = 0``)."""
        if self.name == "linear":
            return 0.0 if n == 1 else -math.inf
        if self.name == "poly":
            if n > self.degree:
                return -math.inf
            return 0.5 * (math.lgamma(self.degree + 1) - math.lgamma(n + 1)
                          - math.lgamma(self.degree - n + 1))
        if self.name == "exp":
            return -0.5 * math.lgamma(n + 1)
        return 0.5 * (n * math.log(2.0 / self.sigma2) - math.lgamma(n + 1))

    def has_level(self, n: int) -> bool:
        """Whether level ``n`` of the feature map is non-zero."""
        return self.log_level_coef(n) > -math.inf

    def point_factor(self, x: np.ndarray) -> float:
        """Level-independent factor of ``Psi(x)``: ``exp(-||x||^2/sigma2)`` or 1."""
        return math.exp(-float(x @ x) / self.sigma2) if self.gaussian else 1.0

    def map_queries(self, orders: np.ndarray) -> int:
        """Oracle queries of one Map_Estimate with the drawn ``orders``.

        Dot-product: ``N`` (none when level ``N`` is absent, the estimate is then
        the zero element); Gaussian: ``2 N1 + N2``.
        """
        if self.gaussian:
            return int(2 * orders[0] + orders[1])
        return int(orders[0]) if self.has_level(int(orders[0])) else 0

    def __call__(self, A: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Exact kernel values ``k(A[i], b)`` for the rows of ``A``."""
        if self.gaussian:
            diff = A - b
            return np.asarray(np.exp(-np.einsum("ij,ij->i", diff, diff) / self.sigma2))
        z = A @ b
        if self.name == "linear":
            return np.asarray(z)
        if self.name == "poly":
            return np.asarray((1.0 + z) ** self.degree)
        return np.asarray(np.exp(z))


def parse_kernel(spec: str) -> Kernel:
    """Parse ``linear``, ``poly:DEG``, ``exp`` or ``gaussian:SIGMA2``; raise ParamError."""
    name, _, arg = str(spec).partition(":")
    if name in ("linear", "exp") and not arg:
        return Kernel(name)
    if name == "poly" and arg:
        try:
            degree = int(arg)
        except ValueError:
            degree = 0
        if degree < 1:
            raise ParamError("kernel", f"poly degree must be an integer >= 1, got {arg!r}")
        return Kernel("poly", degree=degree)
    if name == "gaussian" and arg:
        try:
            sigma2 = float(arg)
        except ValueError:
            sigma2 = math.nan
        if not (math.isfinite(sigma2) and sigma2 > 0):
            raise ParamError("kernel", f"gaussian sigma^2 must be > 0, got {arg!r}")
        return Kernel("gaussian", sigma2=sigma2)
    raise ParamError("kernel", f"unknown kernel {spec!r}; choose one of {list(KERNELS)}")


@dataclass(frozen=True)
class Loss:
    """A loss with derivative ``l'(a) = sum_n gamma_n (a - center)^n`` (P5 Section 2).

    ``smoothing`` is ``s`` of the smoothed losses (P5's plots use ``s = 1``).

    >>> loss = make_loss("smooth_hinge", 1.0)
    >>> a = 0.4
    >>> series = sum(loss.gamma(n) * (a - loss.center) ** n for n in range(40))
    >>> bool(np.isclose(series, loss.derivative(a)))
    True
    """

    name: str
    smoothing: float = 1.0

    @property
    def classification(self) -> bool:
        """Whether the loss is applied to the margin ``y <w, Psi(x)>``."""
        return self.name in CLASSIFICATION_LOSSES

    @property
    def center(self) -> float:
        """Expansion centre ``c`` (1 for the smoothed hinge, else 0)."""
        return 1.0 if self.name == "smooth_hinge" else 0.0

    @property
    def degree(self) -> int | None:
        """Degree of ``l'`` when it is a polynomial (squared loss: 1), else None."""
        return 1 if self.name == "squared" else None

    def gamma(self, n: int) -> float:
        """Taylor coefficient ``gamma_n`` of ``l'`` around the centre."""
        s = self.smoothing
        if self.name == "squared":
            return 2.0 if n == 1 else 0.0
        if self.name == "exp":
            return (-1.0) ** (n + 1) * math.exp(-math.lgamma(n + 1))
        if self.name == "smooth_hinge" and n == 0:
            return -0.5
        if n % 2 == 0:
            return 0.0
        m = (n - 1) // 2
        scale = 2.0 if self.name == "smooth_abs" else 1.0
        return (scale / math.sqrt(math.pi) * (-1.0) ** m
                * math.exp(n * math.log(s) - math.lgamma(m + 1)) / n)

    def derivative(self, a: float) -> float:
        """Closed form of ``l'(a)`` (used by the naive baseline and by tests)."""
        s = self.smoothing
        if self.name == "squared":
            return 2.0 * a
        if self.name == "exp":
            return -math.exp(-a)
        if self.name == "smooth_abs":
            return math.erf(s * a)
        return 0.5 * (math.erf(s * (a - 1.0)) - 1.0)


def make_loss(name: str, smoothing: float = 1.0) -> Loss:
    """Build a loss by name; raise ParamError for an unknown one."""
    if name not in LOSSES:
        raise ParamError("loss", f"unknown loss {name!r}; choose one of {list(LOSSES)}")
    return Loss(name, smoothing)
