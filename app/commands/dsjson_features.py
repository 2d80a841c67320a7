"""A dsjson decision's inputs as a Personalizer loop sees them, and a rank model's policy on them.

Features are named as the model's Personalizer routes name them
(:func:`app.api.personalizer.flatten`) and hashed into the model's sizes as its rank route
hashes them, so that a decision read from a log gets the vectors the same decision sent
through the SDK would: the context is ``c`` without its ``_`` keys (a multi-slot line's slot
adds its own features), an action is its ``j`` list when it has one (Personalizer's layout:
``j`` holds the action's ``features``, ``i`` the id Personalizer added) and otherwise the
action object without its ``_`` keys.  ``noisyloop log import`` teaches a model these inputs
(:mod:`app.commands.log_import`); ``noisyloop evaluate --format dsjson --policy
model:SNAPSHOT_FILE`` evaluates a rank model's policy on them (:func:`model_matrix`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from app.learners.base import CandidateRanker
    from app.learners.config import ModelConfig
    from app.sim.dsjson import DsjsonDecision


def named_action(obj: Mapping[str, Any], field: str) -> dict[str, float | str]:
    """An action's features as the Personalizer routes name them (module docstring)."""
    from app.api.personalizer import flatten

    listed = obj.get("j")
    if isinstance(listed, list) and all(isinstance(o, dict) for o in listed):
        return flatten(listed, f"{field}.j")
    return flatten([{k: v for k, v in obj.items() if not k.startswith("_")}], field)


def inputs(decision: DsjsonDecision, config: ModelConfig
           ) -> tuple[np.ndarray, np.ndarray, int]:
    """The context vector, the candidates' matrix and the logged candidate's row, hashed as
    the model's rank route hashes them (ValueError naming the line and field)."""
    import numpy as np

    from app.api.personalizer import flatten
    from app.api.ranking import action_features
    from app.errors import ApiError
    from app.features import check_norms, feature_bound, to_vector
    from app.fields import NamedFeatures

    where = f"line {decision.line}"
    try:
        x = to_vector(NamedFeatures(named=flatten([decision.context], "c")), config.n_features,
                      "c")
        A = np.stack([to_vector(NamedFeatures(named=named_action(decision.action_objects[j],
                                                                 f"c._multi[{j}]")),
                                action_features(config), f"c._multi[{j}]")
                      for j in decision.candidates])
        check_norms(x, feature_bound(config), "c")
        check_norms(A, feature_bound(config), "c._multi", "c._multi[{}]")
    except ApiError as exc:
        raise ValueError(f"{where}: {exc.field}: {exc.message}") from None
    assert decision.example.logged is not None  # the reader yields labelled decisions
    return x, A, decision.candidates.index(decision.example.logged)


def model_matrix(decisions: Sequence[DsjsonDecision], learner: CandidateRanker,
                 config: ModelConfig, n_actions: int, greedy: bool) -> np.ndarray:
    """A rank model's ``n x K`` policy on the logged decisions: the probability of each row of
    ``_multi`` to be ranked first as it explores (``first_slot_probabilities``), or 1 for its
    greedy first choice with ``greedy``; 0 for the actions a decision could not choose
    (ValueError naming the line of an unusable decision)."""
    import numpy as np

    pi = np.zeros((len(decisions), n_actions))
    for i, decision in enumerate(decisions):
        x, A, _ = inputs(decision, config)
        if greedy:
            first = int(learner.decide(x, False, actions=A).output["ranking"][0]["index"])
            pi[i, decision.candidates[first]] = 1.0
        else:
            pi[i, decision.candidates] = learner.first_slot_probabilities(x, A)
    return pi
