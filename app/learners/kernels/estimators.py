"""Unbiased estimates from noisy copies: the random-order Taylor machinery of P5.

Everything random about a round is drawn up front as a **plan** (a fixed-length
int array, so that it can be logged with the prediction and the service knows
how many copies the feedback must carry): the order(s) of the Map_Estimate of
``Psi(x_t)``, the order ``C`` of the gradient-length estimate and the orders
of its ``C`` Map_Estimates (P5 Algorithm 1, Subroutines 1, 2 and 5).  Layout, with
``k = kernel.orders_per_map`` (1, or 2 for the Gaussian ``(N1, N2)``)::

    plan[0]                 C
    plan[1 : 1+k]           orders of the Map_Estimate of Psi(x_t)
    plan[1+k*j : 1+k*(j+1)] orders of the j-th gradient Map_Estimate, j = 1..C
    rest                    -1

Every order is drawn as ``P(N = n) = (p-1)/p^(n+1)`` and capped at
``max_order`` (the cap biases by at most ``p^-max_order`` times the
truncated tail).  The copies are then consumed in plan order.

A Map_Estimate is stored as ``(level, scale, copies)`` and stands for
``scale * copies[0] (x) ... (x) copies[level-1]`` in the explicit feature space,
so that ``Prod`` is ``scale * scale' * prod_j <copies[j], copies'[j]>`` at equal
levels and 0 otherwise, for both kernel families:

* dot-product (P5 Subroutine 2): ``scale = sqrt(beta_N) p^(N+1)/(p-1)``;
* Gaussian (corrected Subroutine 5): ``scale = c1 p^(N2+1)/(p-1) sqrt((2/s2)^N2/N2!)``
  with ``c1 = (-1)^N1 p^(N1+1)/((p-1) N1! s2^N1) prod_j <x^(2j-1), x^(2j)>``,
  unbiased for ``exp(-||x||^2/s2)``.

Scales are computed through logarithms (``lgamma``), never as big integers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from app.learners.kernels.functions import Kernel, Loss


class MapEstimate(NamedTuple):
    """``scale * copies[0] (x) ... (x) copies[level-1]``; ``scale == 0`` is the zero element."""

    level: int
    scale: float
    copies: np.ndarray


def prod(a: MapEstimate, b: MapEstimate) -> float:
    """``Prod(a, b)``: inner product of two estimates (P5 Subroutines 3 and 6, corrected)."""
    if a.level != b.level or a.scale == 0.0 or b.scale == 0.0:
        return 0.0
    return a.scale * b.scale * float(np.prod(np.einsum("kd,kd->k", a.copies, b.copies)))


def prod_point(a: MapEstimate, x: np.ndarray, kernel: Kernel) -> float:
    """``Prod(a, x)``: inner product with the exact ``Psi(x)`` (P5 Subroutines 4 and 7).

    Its expectation over the copies in ``a`` is ``k(x_a, x)``.
    """
    if a.scale == 0.0:
        return 0.0
    coef = math.exp(kernel.log_level_coef(a.level)) * kernel.point_factor(x)
    return a.scale * coef * float(np.prod(a.copies @ x))


@dataclass(frozen=True)
class TaylorEstimator:
    """Plans, Map_Estimates and gradient-length estimates for one kernel and loss.

    With ``deterministic=True`` (the two-copy special case of P5, linear
    kernel and squared loss only) every order is 1 and no ``p^(n+1)/(p-1)``
    weight is applied: ``g = 2 (<w, x'> - y)`` times ``Psi~ = x``.

    With ``fixed_order=True`` and a polynomial ``l'`` of degree ``D`` (the
    squared loss), ``C = D`` is not drawn and
    ``g~ = sum_{n<=D} gamma_n prod_{j<=n} u_j`` (this
    project's variant): still unbiased, with a quarter of the variance of the random-order
    estimate at ``p = 2`` for the squared loss, and an update every round.

    >>> from app.learners.kernels.functions import make_loss, parse_kernel
    >>> est = TaylorEstimator(parse_kernel("exp"), make_loss("exp"), p=2.0, max_order=30)
    >>> rng = np.random.default_rng(0)
    >>> plans = [est.draw_plan(rng) for _ in range(20000)]
    >>> q = np.mean([est.plan_queries(pl) for pl in plans])   # paper: p/(p-1)^2 = 2
    >>> bool(abs(q - 2.0) < 0.1)
    True
    """

    kernel: Kernel
    loss: Loss
    p: float
    max_order: int
    deterministic: bool = False
    fixed_order: bool = False

    @property
    def fixed_degree(self) -> int | None:
        """``D`` when the gradient order is fixed (deterministic or polynomial ``l'``)."""
        if self.deterministic:
            return 1
        return self.loss.degree if self.fixed_order else None

    @property
    def plan_length(self) -> int:
        """Length of every plan array."""
        return 1 + self.kernel.orders_per_map * (1 + self.max_order)

    def log_weight(self, n: int) -> float:
        """``log(1 / P(N = n)) = log(p^(n+1)/(p-1))`` (0 in the deterministic case)."""
        return 0.0 if self.deterministic else (n + 1) * math.log(self.p) - math.log(self.p - 1)

    def draw_order(self, rng: np.random.Generator) -> int:
        """``N`` with ``P(N = n) = (p-1)/p^(n+1)``, capped at ``max_order`` (P5 Section 3.2)."""
        return min(int(rng.geometric(1.0 - 1.0 / self.p)) - 1, self.max_order)

    def draw_plan(self, rng: np.random.Generator) -> np.ndarray:
        """All random orders of one round (layout in the module docstring)."""
        k = self.kernel.orders_per_map
        plan = np.full(self.plan_length, -1, dtype=np.int64)
        if self.deterministic:
            plan[:3] = 1
            return plan
        plan[1:1 + k] = [self.draw_order(rng) for _ in range(k)]
        fixed = self.fixed_degree
        c = self.draw_order(rng) if fixed is None else fixed
        plan[0] = c
        plan[1 + k:1 + k * (1 + c)] = [self.draw_order(rng) for _ in range(k * c)]
        return plan

    def _map_orders(self, plan: np.ndarray) -> list[np.ndarray]:
        """Orders of the Map_Estimate of ``Psi(x_t)`` followed by the ``C`` gradient ones."""
        k = self.kernel.orders_per_map
        return [plan[1 + k * j:1 + k * (j + 1)] for j in range(1 + int(plan[0]))]

    def skips(self, plan: np.ndarray) -> bool:
        """Whether the round's update is zero whatever the copies: ``gamma_C = 0`` or
        the estimate of ``Psi(x_t)`` is the zero element."""
        first = self._map_orders(plan)[0]
        zero_map = not self.kernel.gaussian and not self.kernel.has_level(int(first[0]))
        if self.fixed_degree is not None:
            return zero_map
        return self.loss.gamma(int(plan[0])) == 0.0 or zero_map

    def plan_queries(self, plan: np.ndarray) -> int:
        """Oracle queries (copies of ``x_t``) the plan consumes; 0 for a skipped round."""
        if self.skips(plan):
            return 0
        return sum(self.kernel.map_queries(o) for o in self._map_orders(plan))

    def map_estimate(self, orders: np.ndarray, copies: np.ndarray) -> MapEstimate:
        """Map_Estimate from the drawn ``orders`` and exactly
        ``kernel.map_queries(orders)`` copies (rows of ``copies``)."""
        kernel = self.kernel
        if kernel.gaussian:
            n1, n2 = int(orders[0]), int(orders[1])
            pairs = np.einsum("kd,kd->k", copies[0:2 * n1:2], copies[1:2 * n1:2])
            log_c1 = self.log_weight(n1) - math.lgamma(n1 + 1) - n1 * math.log(kernel.sigma2)
            c1 = (-1.0) ** n1 * math.exp(log_c1) * float(np.prod(pairs))
            scale = c1 * math.exp(self.log_weight(n2) + kernel.log_level_coef(n2))
            return MapEstimate(n2, scale, copies[2 * n1:2 * n1 + n2].copy())
        n = int(orders[0])
        if not kernel.has_level(n):
            return MapEstimate(n, 0.0, copies[:0].copy())
        scale = math.exp(self.log_weight(n) + kernel.log_level_coef(n))
        return MapEstimate(n, scale, copies[:n].copy())

    def estimate(self, plan: np.ndarray, pool: np.ndarray, target: float,
                 inner: Callable[[MapEstimate], float]) -> tuple[float, MapEstimate]:
        """One round's ``(g~, Psi~(x_t))`` (P5 Algorithm 1 steps 2-3, sign-corrected).

        ``pool`` holds at least :meth:`plan_queries` independent copies of
        ``x_t``; ``inner(e)`` returns ``<w, e>`` for the current ``w``.  With
        ``u_j = y s_j - c`` (classification) or ``s_j - y - c`` (regression),
        ``s_j = <w, Psi~_j>``::

            g~ = kappa * gamma_C * p^(C+1)/(p-1) * prod_{j=1..C} u_j

        with ``kappa = y`` or 1, so ``E[g~] = y l'(y <w, Psi(x)>)`` or
        ``l'(<w, Psi(x)> - y)`` (P5 Subroutine 1, corrected: P5 omits ``y`` inside the product).
        A skipped round returns ``g~ = 0`` and uses no copy.
        """
        d = pool.shape[1]
        if self.skips(plan):
            return 0.0, MapEstimate(0, 0.0, np.zeros((0, d)))
        orders = self._map_orders(plan)
        start = 0
        maps = []
        for o in orders:
            q = self.kernel.map_queries(o)
            maps.append(self.map_estimate(o, pool[start:start + q]))
            start += q
        c = int(plan[0])
        loss = self.loss
        y = float(target)
        u = [(y * inner(e) if loss.classification else inner(e) - y) - loss.center
             for e in maps[1:]]
        if self.fixed_degree is not None:
            g = sum(loss.gamma(n) * math.prod(u[:n]) for n in range(c + 1))
        else:
            gamma = loss.gamma(c)
            g = math.copysign(math.exp(math.log(abs(gamma)) + self.log_weight(c)), gamma)
            g *= math.prod(u)
        return (y * g if loss.classification else g), maps[0]
