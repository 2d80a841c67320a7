"""Feature importances of a ranking model over its logged decisions.

A learner that splits its scores by input feature (``explains_scores``;
:meth:`~app.learners.rank.RidgeRanker.feature_effects`) scores a candidate with action
features ``a`` in context ``x`` as ``w_0 + sum_j x_j C_j + sum_k a_k B_k``.  Over ``n``
logged decisions ``(x_t, a_t)``, ``a_t`` the action each placed first, the importance of
context feature ``j`` is the mean absolute term it adds to that action's score under the
model in force,

    I_j = (1 / n) sum_t |x_tj C_tj|,

and that of action feature ``k`` is ``(1 / n) sum_t |a_tk B_tk|`` (Personalizer's feature
importance, for linear learners: how much each feature moves the scores of what was
chosen; a feature never present scores 0).  Features are hashed buckets: a report names a
bucket by the named keys that went into it (:mod:`app.store.featurenames`); a bucket shared
by several keys gives them one score together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.learners.base import CandidateRanker

#: The kinds of feature a report names, as the name table prefixes them.
KINDS = {"c": "context", "a": "action"}
#: Most features a report lists (the highest scores): a wide model's report stays small.
MAX_FEATURE_SCORES = 1000


@dataclass(frozen=True)
class Importances:
    """Mean absolute score terms per context bucket and per action bucket."""

    context: np.ndarray
    action: np.ndarray
    decisions: int


def importances(ranker: CandidateRanker, n_features: int, n_action_features: int,
                decisions: Iterable[tuple[np.ndarray, np.ndarray]]) -> Importances:
    """The importances (module docstring) over ``decisions``: ``(x, a)`` pairs, ``a`` the
    features of the action placed first."""
    context, action, n = np.zeros(n_features), np.zeros(n_action_features), 0
    for x, a in decisions:
        _, effects, weights = ranker.feature_effects(x, a[None, :])
        context += np.abs(x * effects[0])
        action += np.abs(a * weights[0])
        n += 1
    if n:
        context /= n
        action /= n
    return Importances(context, action, n)


def _namespace(keys: Sequence[str]) -> str:
    """The first part of the keys' names when they share it (Personalizer's namespace: the
    feature object's key), else ``""``."""
    spaces = {key.split(".", 1)[0] if "." in key else "" for key in keys}
    return spaces.pop() if len(spaces) == 1 else ""


def feature_scores(found: Importances,
                   names: Mapping[tuple[str, int], Sequence[str]]) -> list[dict[str, Any]]:
    """Personalizer's ``featureScores`` of the (at most :data:`MAX_FEATURE_SCORES`) buckets
    that scored highest above 0, highest first:
    ``featureName`` (the keys of the bucket joined by ``" | "``, or ``#<bucket>`` when no
    request named it), ``namespace``, ``score``, and noisyloop's ``kind`` and ``bucket``."""
    out: list[dict[str, Any]] = []
    for prefix, scores in (("c", found.context), ("a", found.action)):
        for bucket in np.flatnonzero(scores > 0):
            keys = names.get((prefix, int(bucket)), [])
            out.append({"featureName": " | ".join(keys) if keys else f"#{bucket}",
                        "namespace": _namespace(keys), "score": float(scores[bucket]),
                        "kind": KINDS[prefix], "bucket": int(bucket)})
    out.sort(key=lambda s: -s["score"])
    return out[:MAX_FEATURE_SCORES]
