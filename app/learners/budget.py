"""Label-budget strategies for ORS: when to ask for ``k`` noisy labels instead of one.

Moroshko & Crammer §4.2.  A budget ``B >= 1`` is the average
number of noisy labels per round; each round gets either 1 label or
``k = ceil(B)`` labels.  Strategies (``p = (B - 1)/(k - 1)``, ``p = 0`` when
``B = 1``):

* ``const``: ``k`` labels with probability ``p``, independently per round;
* ``begin``: ``k`` labels in the first ``floor(n·p)`` rounds of a known
  horizon ``n``;
* ``auto``: after the first label ``ỹ`` and the prediction ``ŷ``, stay with
  one label with probability ``a/(a + (ỹ - ŷ)²)``, else ask for ``k - 1`` more;
* ``auto_self_tuned``: ``auto`` starting from ``a = 1``; after every block of
  100 rounds ``a`` is doubled when the running budget (labels used / rounds)
  is above ``0.95·B`` and halved when below (clamped to ``[1e-12, 1e12]``).

Hard cap [ours]: a strategy never asks for more labels than the budget
allows: ``const``, ``auto`` and ``auto_self_tuned`` never let the labels used
exceed ``B·t`` after ``t`` rounds, ``begin`` never exceeds ``B·n`` in total
(it front-loads by design).  ``hard_cap=False`` gives the paper's uncapped
rules (``const`` then spends ``B·n`` labels in expectation).

Interface for the service
-------------------------
One strategy object per model, built with :func:`make_budget`.  When the
first feedback of an event arrives with exactly one value ``ỹ``::

    extra = strategy.labels_wanted(first_value=ỹ, prediction=ŷ)

``ŷ`` should be the prediction of the current weights (``ORS.predict(x)``,
the update is state-dependent); the ``prediction`` logged at decision time is an acceptable
stand-in when the current weights are not at hand.  ``extra`` is 0 or
``k - 1``; when positive the feedback response carries
``"more_labels": extra``, and the event is trained once its ``1 + extra``
labels have arrived (``values`` = all of them), or with the labels received
when the client gives up.  Each call is one round: it charges ``1 + extra``
labels to the budget at once (so undelivered labels are never re-offered and
the cap holds whatever the client does).  ``get_state()`` /
``set_state()`` snapshot the counters as ``dict[str, np.ndarray]``; the coin
of a round is drawn from ``(seed, round)``, so a restored strategy continues
exactly as the original would have.

Examples
--------
>>> strategy = make_budget("auto_self_tuned", budget=2.0, seed=0)
>>> rng = np.random.default_rng(0)
>>> for _ in range(1000):
...     _ = strategy.labels_wanted(rng.normal(), 0.0)
>>> strategy.labels_used <= 2.0 * strategy.rounds, strategy.rounds
(True, 1000)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from app.learners.base import (
    ParamError,
    State,
    check_int,
    check_positive,
    check_range,
    check_state,
)

#: Strategy names accepted by :func:`make_budget`; the first is the default.
STRATEGIES: tuple[str, ...] = ("const", "begin", "auto", "auto_self_tuned")

#: Rounds per block of the self-tuned strategy, its target fraction of ``B``
#: and the clamp of ``a`` (paper §4.2; clamp is ours).
TUNE_BLOCK = 100
TUNE_TARGET = 0.95
A_MIN, A_MAX = 1e-12, 1e12


class LabelBudget:
    """Base strategy: counters, the hard cap and state; subclasses decide ``want``.

    Parameters
    ----------
    budget:
        ``B >= 1``, the average number of labels per round (non-integer allowed).
    seed:
        Seed of the per-round coin; ``None`` draws one at construction.
    hard_cap:
        Never exceed the budget (see the module docstring).

    Attributes
    ----------
    k:
        Labels in a multi-label round, ``ceil(B)``.
    p:
        ``(B - 1)/(k - 1)``, the fraction of multi-label rounds (0 when ``B = 1``).
    rounds, labels_used:
        Rounds decided so far and labels charged so far.
    """

    strategy: ClassVar[str]

    def __init__(self, budget: float, *, seed: int | None = None, hard_cap: bool = True
                 ) -> None:
        self.budget = check_range("budget", budget, 1.0, math.inf, high_open=True)
        self.k = math.ceil(self.budget)
        self.p = (self.budget - 1) / (self.k - 1) if self.k > 1 else 0.0
        self.seed = int(np.random.default_rng().integers(2**62)) if seed is None else seed
        self.hard_cap = hard_cap
        self.rounds = 0
        self.labels_used = 0

    def labels_wanted(self, first_value: float, prediction: float) -> int:
        """Decide one round: the number of labels to ask for beyond the first (0 or k-1).

        Charges ``1 + extra`` labels and advances the round counter.
        """
        extra = self.k - 1 if self.k > 1 and self._want(first_value, prediction) else 0
        if extra and self.hard_cap and self.labels_used + 1 + extra > self._cap():
            extra = 0
        self.rounds += 1
        self.labels_used += 1 + extra
        self._after_round()
        return extra

    def _want(self, first_value: float, prediction: float) -> bool:
        """True when this round should get ``k`` labels (before the cap)."""
        raise NotImplementedError

    def _cap(self) -> float:
        """Most labels that may have been used after the current round."""
        return self.budget * (self.rounds + 1)

    def _after_round(self) -> None:
        """Hook run after each round's counters advanced."""

    def _coin(self) -> float:
        """Uniform draw in ``[0, 1)`` for the current round, from ``(seed, round)``."""
        return float(np.random.default_rng([self.seed, self.rounds]).random())

    def get_state(self) -> State:
        """Counters (and ``a`` for the auto strategies) as named arrays."""
        return {"rounds_": np.array(self.rounds, dtype=np.int64),
                "labels_used_": np.array(self.labels_used, dtype=np.int64)}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Restore the counters written by :meth:`get_state`."""
        checked = check_state(self.get_state(), state)
        self.rounds = int(checked["rounds_"])
        self.labels_used = int(checked["labels_used_"])


class ConstBudget(LabelBudget):
    """``const``: ``k`` labels with probability ``p`` in every round."""

    strategy = "const"

    def _want(self, first_value: float, prediction: float) -> bool:
        return self._coin() < self.p


class BeginBudget(LabelBudget):
    """``begin``: ``k`` labels in the first ``floor(n·p)`` rounds of the horizon ``n``."""

    strategy = "begin"

    def __init__(self, budget: float, *, horizon: int, seed: int | None = None,
                 hard_cap: bool = True) -> None:
        super().__init__(budget, seed=seed, hard_cap=hard_cap)
        self.horizon = check_int("horizon", horizon, 1)

    def _want(self, first_value: float, prediction: float) -> bool:
        return self.rounds < math.floor(self.horizon * self.p)

    def _cap(self) -> float:
        return self.budget * max(self.rounds + 1, self.horizon)


class AutoBudget(LabelBudget):
    """``auto``: ``k`` labels with probability ``(ỹ - ŷ)²/(a + (ỹ - ŷ)²)``."""

    strategy = "auto"

    def __init__(self, budget: float, *, a: float = 1.0, seed: int | None = None,
                 hard_cap: bool = True) -> None:
        super().__init__(budget, seed=seed, hard_cap=hard_cap)
        self.a = check_positive("a", a)

    def _want(self, first_value: float, prediction: float) -> bool:
        delta = float(first_value) - float(prediction)
        if not math.isfinite(delta):
            raise ParamError("values", "first label and prediction must be finite")
        stay = self.a / (self.a + delta * delta)
        return self._coin() >= stay

    def get_state(self) -> State:
        """Counters and ``a``."""
        return {**super().get_state(), "a_": np.array(self.a, dtype=np.float64)}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Restore counters and ``a``."""
        super().set_state(state)
        self.a = float(check_state(self.get_state(), state)["a_"])


class AutoSelfTunedBudget(AutoBudget):
    """``auto_self_tuned``: ``auto`` with ``a`` doubled/halved every 100 rounds.

    The target is ``0.95·B`` (the paper's "limited budget"); ``a`` starts at 1.
    """

    strategy = "auto_self_tuned"

    def __init__(self, budget: float, *, seed: int | None = None, hard_cap: bool = True
                 ) -> None:
        super().__init__(budget, a=1.0, seed=seed, hard_cap=hard_cap)

    def _after_round(self) -> None:
        if self.rounds % TUNE_BLOCK:
            return
        running = self.labels_used / self.rounds
        target = TUNE_TARGET * self.budget
        if running > target:
            self.a = min(2 * self.a, A_MAX)
        elif running < target:
            self.a = max(self.a / 2, A_MIN)


def make_budget(
    strategy: str,
    budget: float,
    *,
    a: float = 1.0,
    horizon: int | None = None,
    seed: int | None = None,
    hard_cap: bool = True,
) -> LabelBudget:
    """Build a validated strategy; invalid settings raise :class:`ParamError`.

    ``a`` is used by ``auto`` only; ``horizon`` (rounds ``n``) is required by
    ``begin`` (a service without a known horizon must not offer it).
    """
    if strategy == "const":
        return ConstBudget(budget, seed=seed, hard_cap=hard_cap)
    if strategy == "begin":
        if horizon is None:
            raise ParamError("horizon", "strategy 'begin' needs the horizon (number of rounds)")
        return BeginBudget(budget, horizon=horizon, seed=seed, hard_cap=hard_cap)
    if strategy == "auto":
        return AutoBudget(budget, a=a, seed=seed, hard_cap=hard_cap)
    if strategy == "auto_self_tuned":
        return AutoSelfTunedBudget(budget, seed=seed, hard_cap=hard_cap)
    raise ParamError("budget_strategy", f"must be one of {list(STRATEGIES)}, got {strategy!r}")
