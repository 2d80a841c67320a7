"""The result of one replay run, shared by every task's runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ReplayResult:
    """Learning curve and summary of one replay run.

    ``metric`` is ``"error_rate"`` (classification tasks: online error of the
    greedy prediction against the true label) or ``"mse"`` (regression tasks:
    squared error against the clean target).  ``curve`` holds ``(t, value)``
    pairs of the running metric after ``t`` rounds.  ``extra`` carries
    task-specific fields written to the JSON as they are (``noise_estimates``,
    ``labels_used``, ``copies_per_round``, ...); a classification task puts
    its chance level there (``chance_error_rate``, :func:`chance_error_rate`).
    """

    algorithm: str
    dataset: str
    rounds: int
    metric: str
    final: float
    curve: list[tuple[int, float]]
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def chance_error_rate(n_classes: int) -> float:
    """``1 - 1/K``: the online error rate of a guess drawn uniformly among ``K`` classes.

    >>> chance_error_rate(10)
    0.9
    """
    return 1.0 - 1.0 / n_classes
