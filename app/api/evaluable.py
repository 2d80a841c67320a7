"""Which policies a model's decision log is evaluated for: its task's
(:attr:`~app.tasks.base.Task.evaluation_policies`), less a configuration where its log
cannot hold what evaluating one needs.

A label or continuous model's configuration learns from the logged contexts and feedback
alone.  A ranking model's is replayed (:mod:`app.evaluation.rankreplay`): a fresh learner
ranks each decision's logged candidates into its one slot, so its learner must rank
candidates, fill a single slot, and log every candidate's features with each decision (a
preset that does, :func:`~app.api.presets.logs_candidates`; a rank model logs them
otherwise only while it has challengers, which no evaluation window can rely on).
"""

from __future__ import annotations

from app.api.presets import logs_candidates
from app.api.ranking import model_slots
from app.learners.config import ModelConfig
from app.tasks import get_task

#: The policy kind of a learner configuration.
CONFIGURATION = "configuration"


def configuration_refusal(config: ModelConfig) -> str | None:
    """Why a configuration cannot be evaluated on the log of the model of ``config``, or
    None (module docstring)."""
    if not config.learner_class.ranks_candidates:
        return None
    if model_slots(config) > 1:
        return (f"configurations are replayed on single-slot models, this one fills "
                f"{model_slots(config)} slots")
    if not logs_candidates(config.preset):
        return ("its decisions do not log every candidate's features (a model of preset "
                "'personalizer' logs them)")
    return None


def evaluation_policies(config: ModelConfig) -> tuple[str, ...]:
    """The policy kinds the model's log is evaluated for (module docstring)."""
    supported = get_task(config.task).evaluation_policies
    if CONFIGURATION in supported and configuration_refusal(config) is not None:
        return tuple(kind for kind in supported if kind != CONFIGURATION)
    return supported
