"""The learned element ``w`` of the RKHS, in bounded memory (P5 Algorithm 1's ``w``).

P5 keeps every Map_Estimate ever made, so memory grows like ``T`` and the
norm recomputation makes the total cost cubic in ``T``.  Two devices bound
the cost here [ours]:

* **Exact low levels.**  Estimates at level ``n`` live in the ``d^n``-dim
  tensor space; all of them (dot-product or Gaussian) can be summed into one
  explicit tensor per level while ``d^n <= explicit_dim``.  This is exact:
  ``Prod`` with a sum of tensors is the sum of the ``Prod``.  With ``p = 2``
  a level ``>= L`` is drawn with probability ``2^-L``, so most of the mass is
  stored exactly.
* **Budgeted support list** for higher levels: at most ``budget`` terms
  ``(coef, level, copies)``; when full, one is evicted -- the one with the
  smallest norm ``|coef| prod_j ||copies_j||`` (``eviction="smallest"``,
  the default) or the oldest (``"oldest"``), after Forgetron/budget
  perceptrons.  Eviction biases the gradient; its effect is
  measured in ``docs/results/kernels.md``.

``||w||^2`` is maintained incrementally:
``||w + a e||^2 = ||w||^2 + 2 a <w, e> + a^2 Prod(e, e)``, and scaling
multiplies it by the square of the factor, so the projection is O(size).

:class:`SupportStore` is the naive baseline's ``w = sum_i alpha_i k(x~_i, .)``
over single noisy copies, with exact kernel values and the same budget rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from app.learners.base import ITEM_BYTES, State, check_state
from app.learners.kernels.estimators import MapEstimate, prod
from app.learners.kernels.functions import Kernel

EVICTIONS: tuple[str, ...] = ("smallest", "oldest")


def _victim(stamp: np.ndarray, size: np.ndarray, eviction: str) -> int:
    """Slot to evict from a full list: smallest ``size`` or oldest ``stamp``."""
    return int(np.argmin(size if eviction == "smallest" else stamp))


def _contract(tensor: np.ndarray, vectors: np.ndarray) -> float:
    """``<tensor, v_0 (x) ... (x) v_{n-1}>`` for a flat C-ordered ``d^n`` tensor."""
    r = tensor
    for v in vectors:
        r = v @ r.reshape(v.shape[0], -1)
    return float(np.asarray(r).reshape(-1)[0])


def _outer(vectors: np.ndarray) -> np.ndarray:
    """Flat C-ordered ``v_0 (x) ... (x) v_{n-1}`` (``[1.0]`` for no vectors)."""
    r = np.ones(1)
    for v in vectors:
        r = np.multiply.outer(r, v).reshape(-1)
    return r


def explicit_offsets(n_features: int, max_order: int, explicit_dim: int) -> list[int]:
    """Offsets of the explicit level tensors ``d^n`` (``n <= max_order``, ``d^n <= explicit_dim``)
    in one flat array; the last is its length.

    >>> explicit_offsets(3, max_order=30, explicit_dim=10)
    [0, 1, 4, 13]
    """
    offsets = [0]
    while len(offsets) - 1 <= max_order and n_features ** (len(offsets) - 1) <= explicit_dim:
        offsets.append(offsets[-1] + n_features ** (len(offsets) - 1))
    return offsets


class FeatureStore:
    """``w = sum of explicit level tensors + budgeted list of Map_Estimates``.

    >>> from app.learners.kernels.functions import parse_kernel
    >>> store = FeatureStore(parse_kernel("exp"), n_features=2, budget=4, max_order=8,
    ...                      explicit_dim=2, eviction="smallest")
    >>> x = np.array([0.5, -1.0])
    >>> store.add(0.5, MapEstimate(1, 2.0, x[None]))          # explicit level 1
    >>> store.add(0.5, MapEstimate(2, 2.0, np.stack([x, x]))) # list, level 2
    >>> bool(np.isclose(store.norm2, store.exact_norm2()))
    True
    """

    def __init__(self, kernel: Kernel, n_features: int, budget: int, max_order: int,
                 explicit_dim: int, eviction: str) -> None:
        self.kernel = kernel
        self.d = n_features
        self.eviction = eviction
        self.offsets = explicit_offsets(n_features, max_order, explicit_dim)
        self.n_explicit = len(self.offsets) - 1
        self.tensor = np.zeros(self.offsets[-1])
        self.coef = np.zeros(budget)
        self.level = np.full(budget, -1, dtype=np.int64)
        self.copies = np.zeros((budget, max_order, n_features))
        self.stamp = np.full(budget, -1, dtype=np.int64)
        self.norm2 = 0.0
        self.added = 0
        self.level_coef = np.array([math.exp(kernel.log_level_coef(n))
                                    for n in range(max_order + 1)])

    @staticmethod
    def state_bytes(n_features: int, budget: int, max_order: int, explicit_dim: int) -> int:
        """Bytes of :meth:`get_state` for these sizes (nothing allocated)."""
        tensor = explicit_offsets(n_features, max_order, explicit_dim)[-1]
        return ITEM_BYTES * (tensor + budget * (3 + max_order * n_features) + 2)

    def _tensor(self, n: int) -> np.ndarray:
        return self.tensor[self.offsets[n]:self.offsets[n + 1]]

    def inner(self, e: MapEstimate) -> float:
        """``<w, e>``: the sum of ``Prod`` of ``e`` with every stored term."""
        if e.scale == 0.0:
            return 0.0
        if e.level < self.n_explicit:
            return e.scale * _contract(self._tensor(e.level), e.copies)
        idx = np.flatnonzero(self.level == e.level)
        if idx.size == 0:
            return 0.0
        dots = np.einsum("mkd,kd->mk", self.copies[idx, :e.level], e.copies).prod(axis=1)
        return e.scale * float(self.coef[idx] @ dots)

    def value(self, x: np.ndarray) -> float:
        """``<w, Psi(x)>`` at an explicit point (Subroutines 4/7 summed over the terms)."""
        total = sum(self.level_coef[n] * _contract(self._tensor(n), np.broadcast_to(x, (n, self.d)))
                    for n in range(self.n_explicit))
        used = self.level >= 0
        if used.any():
            lv = self.level[used]
            dots = self.copies[used] @ x
            dots[np.arange(dots.shape[1])[None, :] >= lv[:, None]] = 1.0
            total += float((self.coef[used] * self.level_coef[lv]) @ dots.prod(axis=1))
        return float(total) * self.kernel.point_factor(x)

    def add(self, alpha: float, e: MapEstimate) -> None:
        """``w <- w + alpha e``, evicting one list term first if the list is full."""
        if alpha == 0.0 or e.scale == 0.0:
            return
        if e.level >= self.n_explicit and not (self.level < 0).any():
            self._evict()
        self.norm2 = max(0.0, self.norm2 + 2.0 * alpha * self.inner(e) + alpha ** 2 * prod(e, e))
        self.added += 1
        if e.level < self.n_explicit:
            self._tensor(e.level)[:] += alpha * e.scale * _outer(e.copies)
            return
        slot = int(np.flatnonzero(self.level < 0)[0])
        self.coef[slot] = alpha * e.scale
        self.level[slot] = e.level
        self.copies[slot] = 0.0
        self.copies[slot, :e.level] = e.copies
        self.stamp[slot] = self.added

    def _term(self, slot: int) -> MapEstimate:
        n = int(self.level[slot])
        return MapEstimate(n, float(self.coef[slot]), self.copies[slot, :n])

    def _evict(self) -> None:
        lv = self.level
        norms = np.linalg.norm(self.copies, axis=2)
        norms[np.arange(norms.shape[1])[None, :] >= lv[:, None]] = 1.0
        slot = _victim(self.stamp, np.abs(self.coef) * norms.prod(axis=1), self.eviction)
        term = self._term(slot)
        cross = self.inner(term)
        self.norm2 = max(0.0, self.norm2 - 2.0 * cross + prod(term, term))
        self.coef[slot] = 0.0
        self.level[slot] = -1
        self.copies[slot] = 0.0
        self.stamp[slot] = -1

    def scale(self, factor: float) -> None:
        """``w <- factor w``."""
        self.tensor *= factor
        self.coef *= factor
        self.norm2 *= factor ** 2

    def exact_norm2(self) -> float:
        """``||w||^2`` recomputed from scratch (O(budget^2); for tests and checks)."""
        total = float(self.tensor @ self.tensor)
        for slot in np.flatnonzero(self.level >= 0):
            total += self.coef[slot] * self.inner(MapEstimate(int(self.level[slot]), 1.0,
                                                              self.copies[slot, :self.level[slot]]))
        return total

    def get_state(self) -> State:
        """Learned arrays by name (fixed shapes)."""
        return {"tensor_": self.tensor.copy(), "coef_": self.coef.copy(),
                "level_": self.level.copy(), "copies_": self.copies.copy(),
                "stamp_": self.stamp.copy(), "norm2_": np.array([self.norm2]),
                "added_": np.array([self.added], dtype=np.int64)}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Replace the learned arrays (validated against the current shapes)."""
        s = check_state(self.get_state(), state)
        self.tensor, self.coef, self.level = s["tensor_"], s["coef_"], s["level_"]
        self.copies, self.stamp = s["copies_"], s["stamp_"]
        self.norm2, self.added = float(s["norm2_"][0]), int(s["added_"][0])


class SupportStore:
    """``w = sum_i alpha_i k(sv_i, .)`` with exact kernel values (plain OGD, P5 §3.1).

    >>> from app.learners.kernels.functions import parse_kernel
    >>> store = SupportStore(parse_kernel("gaussian:1"), n_features=2, budget=2,
    ...                      eviction="oldest")
    >>> for v in ([0.0, 1.0], [1.0, 0.0], [1.0, 1.0]):
    ...     store.add(0.5, np.array(v))
    >>> bool(np.isclose(store.norm2, store.exact_norm2()))
    True
    """

    def __init__(self, kernel: Kernel, n_features: int, budget: int, eviction: str) -> None:
        self.kernel = kernel
        self.eviction = eviction
        self.support = np.zeros((budget, n_features))
        self.alpha = np.zeros(budget)
        self.stamp = np.full(budget, -1, dtype=np.int64)
        self.norm2 = 0.0
        self.added = 0

    @staticmethod
    def state_bytes(n_features: int, budget: int) -> int:
        """Bytes of :meth:`get_state` for these sizes (nothing allocated)."""
        return ITEM_BYTES * (budget * (n_features + 2) + 2)

    def value(self, x: np.ndarray) -> float:
        """``<w, Psi(x)> = sum_i alpha_i k(sv_i, x)``."""
        used = self.stamp >= 0
        return float(self.alpha[used] @ self.kernel(self.support[used], x))

    def _kxx(self, x: np.ndarray) -> float:
        return float(self.kernel(x[None], x)[0])

    def add(self, alpha: float, x: np.ndarray) -> None:
        """``w <- w + alpha k(x, .)``, evicting one support vector first if full."""
        if alpha == 0.0:
            return
        if not (self.stamp < 0).any():
            size = np.abs(self.alpha) * np.sqrt([self._kxx(v) for v in self.support])
            slot = _victim(self.stamp, size, self.eviction)
            a, v = float(self.alpha[slot]), self.support[slot].copy()
            self.norm2 = max(0.0, self.norm2 - 2.0 * a * self.value(v) + a * a * self._kxx(v))
            self.alpha[slot], self.stamp[slot] = 0.0, -1
        self.norm2 = max(0.0, self.norm2 + 2.0 * alpha * self.value(x)
                         + alpha * alpha * self._kxx(x))
        self.added += 1
        slot = int(np.flatnonzero(self.stamp < 0)[0])
        self.support[slot], self.alpha[slot], self.stamp[slot] = x, alpha, self.added

    def scale(self, factor: float) -> None:
        """``w <- factor w``."""
        self.alpha *= factor
        self.norm2 *= factor ** 2

    def exact_norm2(self) -> float:
        """``||w||^2 = alpha^T K alpha`` recomputed from scratch."""
        used = self.stamp >= 0
        pairs = zip(self.alpha[used], self.support[used], strict=True)
        return float(sum(a * self.value(v) for a, v in pairs))

    def get_state(self) -> State:
        """Learned arrays by name (fixed shapes)."""
        return {"support_": self.support.copy(), "alpha_": self.alpha.copy(),
                "stamp_": self.stamp.copy(), "norm2_": np.array([self.norm2]),
                "added_": np.array([self.added], dtype=np.int64)}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Replace the learned arrays (validated against the current shapes)."""
        s = check_state(self.get_state(), state)
        self.support, self.alpha, self.stamp = s["support_"], s["alpha_"], s["stamp_"]
        self.norm2, self.added = float(s["norm2_"][0]), int(s["added_"][0])
