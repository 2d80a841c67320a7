"""``noisyloop log import``: warm-start a rank model (a Personalizer loop) from a logged history.

Reads a Decision Service JSON log (``--format dsjson``, what Personalizer exported,
:mod:`app.sim.dsjson`), and teaches the model's learner every logged decision in the log's
order, off-policy: for each decision the learner is shown the logged context and candidates,
plays the logged choice (``follow_ranking``, as the trainer feeds it logged plays and as a
``config:`` evaluation trains) and learns its reward, ``-_label_cost``.  The learner starts
from the model's current snapshot and the result goes back as a new version of the model
(``PUT /v1/models/{id}/snapshot``: atomic and versioned, so ``rollback`` undoes it).

Features are named as the model's Personalizer routes name them and hashed into the model's
sizes (:mod:`app.commands.dsjson_features`), so that what was learned from the log scores the
same features the SDK sends afterwards.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from app.commands.arguments import add_client_arguments
from app.optional import CLIENT, require

if TYPE_CHECKING:
    import numpy as np

    from app.learners.base import Learner
    from app.learners.config import ModelConfig
    from app.sim.dsjson import DsjsonCounts, DsjsonDecision

#: Logged decisions learned per ``learn_many`` (a bound on the memory of one step).
BATCH = 256


def register(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``log import`` to the ``log`` parser's sub-commands."""
    parser = actions.add_parser("import", help="warm-start a rank model from a logged history",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_client_arguments(parser)
    parser.add_argument("--model", required=True, help="the model id (a rank model)")
    parser.add_argument("--log", required=True, metavar="PATH", help="the log file")
    parser.add_argument("--format", required=True, choices=("dsjson",),
                        help="dsjson: Decision Service JSON (Personalizer's log, VW's --dsjson)")
    parser.add_argument("--skip-bad-lines", action="store_true",
                        help="count and skip malformed lines (default: stop at the first, "
                             "naming its line and field)")
    parser.set_defaults(handler=handle)


def warm_start(learner: Learner, config: ModelConfig,
               decisions: Iterable[DsjsonDecision], counts: DsjsonCounts,
               skip_bad: bool = False) -> int:
    """Teach ``learner`` the logged decisions in order (module docstring); returns how many
    it learned.  A decision the model cannot take (a reward outside ``[0, 1]``, features
    beyond its ``max_feature_norm``) raises ValueError naming its line, or with ``skip_bad``
    is counted in ``counts.bad_lines`` and skipped.  ``learner`` must rank candidates from a
    logged play (``ranks_candidates`` and ``follows_baseline``)."""
    import numpy as np

    from app.commands.dsjson_features import inputs
    from app.learners.base import CandidateRanker, stack_events
    from app.learners.offpolicy import learn_finite

    slots = int(config.params["slots"])
    pending: list[dict[str, np.ndarray]] = []
    learned = 0
    for decision in decisions:
        try:
            reward = -float(cast(float, decision.example.cost))
            if not 0.0 <= reward <= 1.0:
                raise ValueError(f"line {decision.line}: _label_cost: reward {reward} (= -cost) "
                                 "outside [0, 1], the rewards a Personalizer loop takes")
            x, A, logged = inputs(decision, config)
        except ValueError as exc:
            if not skip_bad:
                raise
            counts.bad(exc)
            continue
        own = cast(CandidateRanker, learner).follow_ranking(x, [logged], actions=A, slots=1)
        clicks = np.zeros(slots)
        clicks[0] = reward
        pending.append({**own.context, "clicks": clicks})
        if len(pending) == BATCH:
            learn_finite(learner, stack_events(pending))
            learned, pending = learned + len(pending), []
    if pending:
        learn_finite(learner, stack_events(pending))
        learned += len(pending)
    return learned


def imported_snapshot(snapshot: Mapping[str, Any], path: str, skip_bad: bool
                      ) -> tuple[dict[str, Any], int, DsjsonCounts]:
    """The model's snapshot (``GET .../snapshot``) after learning the log at ``path``, the
    decisions learned and what the read counted (ValueError on a log or model it cannot
    use)."""
    from app.api.modelops import encode_array
    from app.evaluation.servicelog import learner_of_snapshot
    from app.sim.dsjson import DsjsonCounts, read_dsjson

    learner, config = learner_of_snapshot(snapshot)
    if not (learner.ranks_candidates and learner.follows_baseline):
        raise ValueError(f"--model: a {config.task} model's {config.algorithm!r} learner does "
                         "not rank candidates from a logged play: import into a rank model "
                         "(preset personalizer)")
    counts = DsjsonCounts()
    learned = warm_start(learner, config,
                         read_dsjson(path, counts, skip_bad=skip_bad), counts, skip_bad)
    if not learned:
        raise ValueError(f"--log: {path}: no labelled decision to learn ({counts.to_dict()})")
    state = {name: encode_array(arr).model_dump() for name, arr in learner.get_state().items()}
    return {"model": snapshot["model"], "state": state}, learned, counts


def handle(args: argparse.Namespace) -> int:
    """Import the log; 2 on an error (printed), 0 otherwise."""
    require("noisyloop_client", CLIENT, "noisyloop log import")
    from noisyloop_client import Client, NoisyloopError

    from app.commands.arguments import error_message

    client = Client(args.url, args.key, timeout=60.0)
    try:
        snapshot = client.get_snapshot(args.model)
        body, learned, counts = imported_snapshot(cast(Mapping[str, Any], snapshot), args.log,
                                                  args.skip_bad_lines)
        model = client.put_snapshot(args.model, body)
    except (ValueError, OSError, NoisyloopError) as exc:
        message = error_message(exc, args.url) if isinstance(exc, NoisyloopError) else exc
        print(f"noisyloop log import: error: {message}", file=sys.stderr)
        return 2
    finally:
        client.close()
    skipped = {k: v for k, v in counts.to_dict().items()
               if k not in ("decisions", "pdrop") and v}
    print(f"{learned} logged decisions learned into {args.model} (version "
          f"{model.get('version')}); skipped: {skipped or 'none'}", file=sys.stderr)
    return 0
