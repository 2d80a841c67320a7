"""``noisyloop evaluate``: estimate a target policy's value on a logged data set, off-policy.

Reads a Vowpal Wabbit CB/ADF text log (``--format vw``), a Decision Service JSON log
(``--format dsjson``, what Personalizer exported and VW reads with ``--dsjson``) or an Open Bandit
Dataset CSV with its ``item_context.csv`` beside it (``--format obd``),
and prints IPS, self-normalised IPS and doubly robust estimates of
``--policy`` with bootstrap intervals and the effective sample size (see
:mod:`app.evaluation.estimators`), optionally noise-corrected with
``--rho0/--rho1`` (a rank log per slot, for examination and trust bias:
``--slot-rates``).  ``--format noisyloop`` reads the service's own decision
log (a ``noisyloop log export`` file), where ``--policy model:SNAPSHOT_FILE``
evaluates a model's policy; the log may be JSON Lines, or Parquet (a file, a
directory or a glob of files) read in batches with bounded memory, over
``--workers`` processes or a Spark cluster (``--engine spark``);
a rank log's JSON Lines are read in batches too, and so is either kind of
label log for ``--policy config:JSON`` (:mod:`app.evaluation.configrun`).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from app.optional import LAB, PARQUET, require

if TYPE_CHECKING:
    import numpy as np

    from app.evaluation.configrun import ConfigPlan, EventBatch
    from app.evaluation.estimators import LabelLog, Options
    from app.evaluation.rates import SlotRates
    from app.evaluation.shapes import ConfigShape, LogShape
    from app.evaluation.streaming import Policy
    from app.sim.dsjson import DsjsonDecision
    from app.sim.logs import AdfExample, ObdRecord

EPILOG = """\
policies: uniform (each action, or each item at each position, with probability 1/K; a
noisyloop rank log: a uniformly random ranking of each request's candidates),
logging (the policy that wrote the log), fixed:ID (always action ID: the 0-based line of
the action in a VW example, or the OBD item_id), empirical:FILE (obd only: each item at
each position as often as in the OBD log FILE, the policy that wrote FILE when it ignores
the context), model:SNAPSHOT_FILE (noisyloop label logs: the policy of a model snapshot
saved from GET /v1/models/{id}/snapshot as it explores, its probability of each label on
each logged context; on a dsjson log: a rank model's probability of ranking each action
first, on the decisions' features as its Personalizer routes would hash them),
model-greedy:SNAPSHOT_FILE (the same model's greedy label, or first choice),
config:JSON (vw, dsjson and noisyloop label logs: a learner of
{"algorithm": ..., "params": {...}} learns the first --train-fraction of the log's events
in order, off-policy from the logged action, click and propensity, and is evaluated on
the rest as it explores; "split" says which events trained and which were evaluated; a
noisyloop log is streamed, one pass counting its events, then two in batches, in one
process; a vw or dsjson log is read into memory; a noisyloop continuous log, with
--model-snapshot: a learner of that task on the model's range, its greedy action smoothed
with its bandwidth scored by smoothed IPS, SNIPS and DR).

vw: one example per blank-line-separated block; the reward is -cost of the labelled
action (VW minimises cost: log a click as cost -1); every example must have the same number
of actions.  dsjson: one decision per labelled line (a multi-slot line: one per labelled
slot, its context with the slot's features; "positions": each slot's estimates), evaluated
as a vw log of the same examples (the action: the row of c._multi; the reward:
-_label_cost; uniform: over the actions each decision could choose, a slot's candidates,
lines may differ in their number of actions); _skipLearn lines, lines without a decision
and unlabelled ones are skipped and counted ("dsjson" in the result); a malformed line is
an error naming its line and field, or with --skip-bad-lines counted and skipped.
A dsjson continuous-action log (VW --cats, lines labelled _label_ca: action, cost,
pdf_value) is evaluated by smoothed IPS and SNIPS for uniform, logging and fixed:VALUE
(--action-range, --bandwidth; reward: -cost).
obd: positions are evaluated independently (Open Bandit Pipeline's IPW with positions);
the value is the expected click per impression, with one entry per position.
An obd log with slate_id and pscore_cascade columns also gets "slates": reward-interaction
IPS (rips, snrips; Open Bandit Pipeline's slate estimators) of the uniform or logging
policy, the expected clicks per slate.

noisyloop: a `noisyloop log export` JSON Lines file, or its Parquet export (a file, a
directory or a glob; streamed in batches: --workers or --engine spark;
rank logs' JSON Lines are streamed too).  A label log is
evaluated per event (reward: the click; labels: the model's n_classes with model:, else
the largest seen + 1).  A rank log is evaluated per ranking for uniform (a uniformly
random ranking of each request's own candidates) and logging: the value of slot 0 with
n = the rankings, "positions" per slot (cascade weights), "slot_impressions", and "slates"
(expected clicks per ranking: rips, snrips) when every ranking showed as many slots; with
--slot-rates each slot's clicks are corrected for its examination and trust bias, so the
values are relevance (per slot, and relevant items per ranking)."""


#: Policies of a model snapshot: as it explores, and its greedy label.
MODEL_KINDS = ("model", "model-greedy")
#: Every form of ``--policy`` (the usage line's).
POLICY_METAVAR = ("{uniform,logging,fixed:ID,empirical:FILE,model:SNAPSHOT_FILE,"
                  "model-greedy:SNAPSHOT_FILE,config:JSON}")
#: The file beside an OBD log CSV that lists its items.
ITEM_CONTEXT = "item_context.csv"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``evaluate`` parser."""
    parser = subparsers.add_parser(
        "evaluate", allow_abbrev=False,
        help="off-policy estimate of a policy's value on a logged data set (IPS, SNIPS, DR)",
        description=__doc__.split("\n\n")[0] if __doc__ else None, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log", required=True, metavar="PATH",
                        help="the logged data (noisyloop: a JSON Lines file, or a Parquet "
                             "file, a directory or a glob of Parquet files)")
    parser.add_argument("--format", required=True, choices=("vw", "dsjson", "obd", "noisyloop"),
                        help="vw: Vowpal Wabbit CB/ADF text; dsjson: Decision Service JSON "
                             "(Personalizer's log, VW's --dsjson); obd: Open Bandit Dataset CSV; "
                             "noisyloop: the service's decision log (noisyloop log export)")
    parser.add_argument("--policy", required=True, metavar=POLICY_METAVAR,
                        help="the target policy (below)")
    parser.add_argument("--model-snapshot", default=None, metavar="SNAPSHOT_FILE",
                        help="continuous logs: the model's saved snapshot (GET "
                             "/v1/models/{id}/snapshot), whose action range, bandwidth and "
                             "noise rates the evaluation uses")
    parser.add_argument("--train-fraction", type=float, default=0.5, metavar="F",
                        help="config:JSON: the first F of the log's events train the "
                             "configuration, the rest evaluate it (default 0.5)")
    parser.add_argument("--rho0", type=float, default=None,
                        help="click-noise rate P(click | no true click); with --rho1 every "
                             "estimator uses h(f) = (f - rho0) / (1 - rho0 - rho1)")
    parser.add_argument("--rho1", type=float, default=None,
                        help="click-noise rate P(no click | true click)")
    parser.add_argument("--rho0-se", type=float, default=0.0, metavar="SE",
                        help="standard error of --rho0 when it is an estimate (a 95%% interval "
                             "[lo, hi] gives (hi - lo) / 3.92): every bootstrap resample "
                             "draws its own rates, so the intervals carry the rates' error")
    parser.add_argument("--rho1-se", type=float, default=0.0, metavar="SE",
                        help="standard error of --rho1")
    parser.add_argument("--slot-rates", default=None, metavar="FILE.json",
                        help="noisyloop rank logs: per-slot examination and click noise, the "
                             "JSON of GET /v1/models/{id}/noise (or its slots): slot k's "
                             "clicks become (f - theta_k rho0_k) / (theta_k (1 - rho0_k - "
                             "rho1)), their intervals' errors drawn per resample (in place of "
                             "--rho0 --rho1)")
    parser.add_argument("--bootstrap", type=int, default=200, metavar="N",
                        help="bootstrap resamples per interval (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling (default 0)")
    parser.add_argument("--json", default=None, metavar="OUT", help="write the result as JSON")
    parser.add_argument("--plot", default=None, metavar="OUT.png",
                        help="plot the three estimates with their intervals")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="Parquet logs: processes reading the log's row groups "
                             "(default 1)")
    parser.add_argument("--engine", choices=("local", "spark"), default="local",
                        help="Parquet logs: local (default) or spark (the `spark` "
                             "extra; SPARK_MASTER or local[*])")
    parser.add_argument("--skip-bad-lines", action="store_true",
                        help="dsjson: count and skip malformed lines (default: stop at the "
                             "first, naming its line and field)")
    parser.add_argument("--action-range", type=float, nargs=2, default=None,
                        metavar=("LO", "HI"),
                        help="dsjson CATS logs (_label_ca): the range the actions were "
                             "played in (default: the logged actions' smallest and largest)")
    parser.add_argument("--bandwidth", type=float, default=None, metavar="H",
                        help="dsjson CATS logs: the smoothing half-width of fixed:VALUE "
                             "(default: the action range over 32)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(handler=handle)




def parse_policy(text: str) -> str | int:
    """``uniform``, ``logging``, the action of ``fixed:ID``, or ``fixed:VALUE`` as given (a
    continuous log's action; ValueError otherwise)."""
    if text in ("uniform", "logging"):
        return text
    kind, _, ident = text.partition(":")
    if kind == "fixed":
        try:
            return int(ident)
        except ValueError:
            pass
        try:
            float(ident)
            return text
        except ValueError:
            pass
    if kind in ("empirical", "config", *MODEL_KINDS) and ident:
        return text
    raise ValueError(f"--policy: {text!r} is not uniform, logging, fixed:ID, empirical:FILE, "
                     "model:SNAPSHOT_FILE, model-greedy:SNAPSHOT_FILE or config:JSON")


def vw_log(path: str) -> LabelLog:
    """The labelled examples of a VW ADF file as a label log (contexts: shared features)."""
    from app.sim.logs import read_vw_adf

    return adf_log([e for e in read_vw_adf(path) if e.logged is not None], path)


@dataclass(frozen=True)
class FileLog:
    """A ``vw`` or ``dsjson`` file read as a label log."""

    log: LabelLog
    counts: dict[str, Any] | None = None
    """dsjson: what the read counted (:class:`app.sim.dsjson.DsjsonCounts`)."""
    positions: np.ndarray | None = None
    """dsjson: each event's slot when some line is multi-slot (0 for a single-slot line)."""
    candidates: list[list[int]] | None = None
    """dsjson: the actions each event could choose (``DsjsonDecision.candidates``), when
    they are not all K for some event."""
    pi: np.ndarray | None = None
    """dsjson with ``model:``: the rank model's ``n x K`` policy."""

    def uniform(self) -> np.ndarray | None:
        """``uniform`` over each event's candidates (None: over all K actions, as vw)."""
        import numpy as np

        if self.candidates is None:
            return None
        pi = np.zeros((self.log.n, self.log.n_actions))
        for i, rows in enumerate(self.candidates):
            pi[i, rows] = 1.0 / len(rows)
        return pi


def file_log(args: argparse.Namespace, policy: str | int | None = None) -> FileLog:
    """The ``vw`` or ``dsjson`` file of ``--log``; for ``model:SNAPSHOT_FILE`` (or
    ``model-greedy:``) on dsjson with the rank model's policy (:func:`dsjson_model`)."""
    import numpy as np

    from app.sim.dsjson import DsjsonCounts, read_dsjson

    if args.format == "vw":
        return FileLog(vw_log(args.log))
    counts = DsjsonCounts()
    decisions = list(read_dsjson(args.log, counts, skip_bad=args.skip_bad_lines))
    log = adf_log([d.example for d in decisions], args.log, same_actions=False)
    multi = any(d.slot is not None for d in decisions)
    positions = np.array([d.slot or 0 for d in decisions]) if multi else None
    ragged = any(len(d.candidates) != log.n_actions for d in decisions)
    return FileLog(log, counts.to_dict(), positions,
                   [d.candidates for d in decisions] if ragged else None,
                   dsjson_model(decisions, log, policy))


def dsjson_model(decisions: list[DsjsonDecision], log: LabelLog, policy: str | int | None
                 ) -> np.ndarray | None:
    """The rank model's ``n x K`` policy of ``model:SNAPSHOT_FILE`` on the decisions'
    Personalizer features (:func:`app.commands.dsjson_features.model_matrix`), None for any
    other policy (ValueError for a model that does not rank candidates)."""
    from app.commands.dsjson_features import model_matrix
    from app.evaluation.servicelog import snapshot_learner
    from app.learners.base import CandidateRanker

    kind, _, snapshot = policy.partition(":") if isinstance(policy, str) else ("", "", "")
    if kind not in MODEL_KINDS:
        return None
    learner, config = snapshot_learner(snapshot)
    if not learner.ranks_candidates:
        raise ValueError(f"--policy: {snapshot} is a {config.task} model's; on a dsjson log "
                         "model:SNAPSHOT_FILE evaluates a rank model (a Personalizer loop)")
    return model_matrix(decisions, cast(CandidateRanker, learner), config, log.n_actions,
                        greedy=kind == "model-greedy")


def adf_log(examples: list[AdfExample], path: str, same_actions: bool = True) -> LabelLog:
    """Labelled ADF examples as a label log (contexts: shared features; the reward: -cost;
    ValueError when there is none, or with ``same_actions`` when their numbers of actions
    differ; else K is the largest number)."""
    import numpy as np

    from app.evaluation.estimators import LabelLog
    from app.sim.logs import FeatureIndex

    if not examples:
        raise ValueError(f"{path}: no labelled example")
    sizes = {len(e.actions) for e in examples}
    if same_actions and len(sizes) > 1:
        raise ValueError(f"{path}: examples have different numbers of actions {sorted(sizes)}")
    index = FeatureIndex(name for e in examples for name in e.shared)
    return LabelLog(X=index.dense(e.shared for e in examples),
                    actions=np.array([e.logged for e in examples]),
                    propensities=np.array([e.probability for e in examples], dtype=float),
                    rewards=-np.array([e.cost for e in examples], dtype=float),
                    n_actions=max(sizes))


def obd_rows(path: str, items: list[int], prefix: str = "") -> tuple[list[ObdRecord], np.ndarray]:
    """The rows of the OBD log CSV at ``path`` and each row's item as its index in
    ``items`` (ValueError, its message led by ``prefix``, when there is no row or an item
    is not among ``items``)."""
    import numpy as np

    from app.sim.logs import read_obd

    column = {item: k for k, item in enumerate(items)}
    records = list(read_obd(path))
    if not records:
        raise ValueError(f"{prefix}{path}: no rows")
    unknown = sorted({r.item_id for r in records} - set(column))
    if unknown:
        raise ValueError(f"{prefix}{path}: item ids {unknown[:5]} not in the evaluated log's "
                         "item_context.csv")
    return records, np.array([column[r.item_id] for r in records])


def obd_items(path: str, option: str) -> list[int]:
    """The item ids, in order, of the ``item_context.csv`` beside the OBD log at ``path``
    (ValueError naming ``option`` and saying what the file is for when it is missing)."""
    from app.sim.logs import read_obd_items

    listed = Path(path).parent / ITEM_CONTEXT
    if not listed.is_file():
        raise ValueError(
            f"{option}: {listed} is missing: an Open Bandit Dataset log's items (item_id and "
            f"their item_feature_* columns) are read from the {ITEM_CONTEXT} in its folder, "
            f"as the dataset ships it (<policy>/<campaign>/<campaign>.csv beside "
            f"<policy>/<campaign>/{ITEM_CONTEXT})")
    return sorted(read_obd_items(listed))


def obd_log(path: str) -> tuple[LabelLog, list[int], np.ndarray]:
    """An OBD log CSV as a label log over its items (``item_context.csv`` beside it), the
    item ids in action order, and each row's position.  Contexts: the user's features and
    the position one-hot, so that the reward model sees the position."""
    import numpy as np

    from app.evaluation.estimators import LabelLog
    from app.sim.logs import FeatureIndex

    items = obd_items(path, "--log")
    records, actions = obd_rows(path, items)
    positions = np.array([r.position for r in records])
    index = FeatureIndex(name for r in records for name in r.context)
    X = np.hstack([index.dense(r.context for r in records),
                   np.eye(int(positions.max()) + 1)[positions]])
    log = LabelLog(X=X, actions=actions,
                   propensities=np.array([r.propensity for r in records]),
                   rewards=np.array([r.click for r in records]), n_actions=len(items))
    return log, items, positions


def empirical_target(path: str, items: list[int], positions: np.ndarray) -> np.ndarray:
    """``pi(item | position)`` of each row as in the OBD log at ``path`` (``n x K``).  The
    log must be of the evaluated log's items (its own ``item_context.csv`` lists the same
    ids): another campaign's log, whose item ids may all fall among them, is refused."""
    import numpy as np

    from app.evaluation.policies import position_frequencies

    own = obd_items(path, "--policy: empirical:FILE")
    if own != items:
        raise ValueError(
            f"--policy: {path} is a log of other items (another campaign's?): its "
            f"{ITEM_CONTEXT} lists {len(own)} items ({_ids(own)}), the evaluated log's "
            f"{len(items)} ({_ids(items)}); empirical:FILE needs a log of the same items, "
            f"so that each item id means the same item in both")
    records, actions = obd_rows(path, items, "--policy: ")
    frequencies = position_frequencies(actions, np.array([r.position for r in records]),
                                       len(items))
    if positions.max() >= len(frequencies):
        raise ValueError(f"--policy: {path} has no events at position {positions.max()}")
    return np.asarray(frequencies[positions])


def _ids(items: list[int]) -> str:
    """Item ids for a message: all of a few, else the first and last."""
    return ", ".join(map(str, items)) if len(items) <= 6 else f"{items[0]}..{items[-1]}"


def obd_slates(path: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Clicks and logging cascade propensities, ``slates x slots``, of an OBD slate log
    (``None`` without ``slate_id``); every slate must fill every position once."""
    import csv

    import numpy as np

    from app.sim.logs import read_obd

    with open(path, newline="", encoding="utf-8") as f:
        if "slate_id" not in next(csv.reader(f), []):
            return None
    records = list(read_obd(path))
    slots = max(r.position for r in records) + 1
    by_slate: dict[str, dict[int, tuple[float, float]]] = {}
    for r in records:
        assert r.pscore_cascade is not None
        by_slate.setdefault(str(r.slate), {})[r.position] = (r.click, r.pscore_cascade)
    incomplete = [s for s, rows in by_slate.items() if len(rows) != slots]
    if incomplete or len(records) != slots * len(by_slate):
        raise ValueError(f"{path}: every slate needs one row per position (slates "
                         f"{incomplete[:5] or 'with repeated positions'})")
    cells = np.array([[rows[k] for k in range(slots)] for rows in by_slate.values()])
    return cells[:, :, 0], cells[:, :, 1]


def label_policy(policy: str | int) -> Policy:
    """``uniform``, ``logging`` or a fixed action as a function of a batch of events
    (picklable, for ``--workers``)."""
    from functools import partial

    from app.evaluation.policies import fixed_policy, logging_policy, uniform_policy

    if policy == "uniform":
        return uniform_policy
    if policy == "logging":
        return logging_policy
    if not isinstance(policy, int):
        raise ValueError(f"--policy: {policy}: a label log takes fixed:ID, an action's number")
    return partial(fixed_policy, action=policy)


def target(log: LabelLog, policy: str | int) -> np.ndarray | None:
    """The ``n x K`` matrix of ``policy`` (``None`` for the logging policy)."""
    return label_policy(policy)(log)


def model_policy(policy: str | int) -> tuple[Policy, int | None] | None:
    """For ``model:FILE`` or ``model-greedy:FILE``: the model's policy on a batch of events
    and its number of labels; None for other policies."""
    from functools import partial

    from app.evaluation.policies import learner_policy
    from app.evaluation.servicelog import snapshot_learner

    kind, _, snapshot = policy.partition(":") if isinstance(policy, str) else ("", "", "")
    if kind not in MODEL_KINDS:
        return None
    learner, config = snapshot_learner(snapshot)
    return partial(learner_policy, learner=learner, greedy=kind == "model-greedy"), \
        config.n_classes


def streamed(path: str) -> bool:
    """Whether ``path`` is Parquet, read in batches (:mod:`app.evaluation.parquetlog`)."""
    from app.evaluation.parquetlog import is_parquet

    return is_parquet(path)


def stream_options(args: argparse.Namespace, rates: SlotRates | None = None) -> Options:
    """The estimators' options of the arguments (``rates``: a rank log's per-slot rates,
    ``--slot-rates``)."""
    from app.evaluation.estimators import Options

    return Options(args.rho0, args.rho1, args.rho0_se, args.rho1_se, args.bootstrap,
                   seed=args.seed, slot_rates=rates)


def parse_config(text: str) -> Any:
    """The configuration of ``config:JSON`` (ValueError naming ``--policy``)."""
    try:
        return json.loads(text.partition(":")[2])
    except ValueError as exc:
        raise ValueError(f"--policy: config:JSON is not JSON ({exc})") from None


def config_inputs(args: argparse.Namespace, text: str
                  ) -> tuple[LabelLog, np.ndarray, dict[str, Any]]:
    """For ``config:JSON`` on a vw or dsjson log (in memory): the evaluated part of the log,
    the trained configuration's ``n x K`` matrix on it and the ``split`` field (ValueError
    saying why not)."""
    from app.evaluation.training import config_policy

    config = parse_config(text)
    if args.format not in ("vw", "dsjson"):
        raise ValueError("--policy: config:JSON needs --format noisyloop, vw or dsjson")
    log = file_log(args).log
    rates = None if args.rho0 is None or args.rho1 is None else (args.rho0, args.rho1)
    trained = config_policy(config, label_task(), log, args.train_fraction, rates,
                            seed=args.seed)
    return trained.log, trained.pi, trained.split()


def label_task() -> str:
    """The task of a ``config:JSON`` on a label log (a vw or dsjson log is one, by its
    format: a click of each play): the first whose log shape evaluates a configuration
    learning from a click of each play."""
    from app.evaluation.shapes import ConfigShape
    from app.evaluation.training import LABEL_FEEDBACK
    from app.tasks import TASKS

    return next(name for name, task in TASKS.items()
                if "configuration" in task.evaluation_policies
                and cast(ConfigShape, task.log_shape).feedback == LABEL_FEEDBACK)


def config_run(args: argparse.Namespace, text: str) -> dict[str, Any]:
    """The result JSON of ``config:JSON`` on a noisyloop label log, streamed in batches with
    bounded memory (:func:`app.evaluation.configrun.evaluate_config`, the code of the
    service's evaluations).  The split needs the log's events and labels first: a JSON
    Lines log is counted by a pass parsing every line, a Parquet log by a pass over its
    ``type``, ``action`` and ``greedy_action`` columns (its footers' row counts hold the
    markers too); then two passes learn and evaluate."""
    from app.evaluation.configrun import ConfigPlan

    config = parse_config(text)
    check_config_run(args)
    options = stream_options(args)
    options.correction()  # refuse unusable rates before reading the log
    events, n_actions, batches = label_source(args.log)
    return run_config_plan(args, lambda: ConfigPlan.of(
        config, label_task(), n_actions, options, events, args.train_fraction,
        shape=cast("ConfigShape", exported_shape(args.log))), batches)


def check_config_run(args: argparse.Namespace) -> None:
    """ValueError naming the option a ``config:JSON`` run cannot take."""
    if args.workers > 1 or args.engine != "local":
        raise ValueError("--workers and --engine: config:JSON runs in one process (its "
                         "learner learns the log's events in order)")
    if not 0.0 < args.train_fraction < 1.0:
        raise ValueError(f"--train-fraction must be in (0, 1), not {args.train_fraction}")


def run_config_plan(args: argparse.Namespace, plan_of: Callable[[], ConfigPlan],
                    batches: Callable[[], Iterable[EventBatch]]) -> dict[str, Any]:
    """The result JSON of the configuration's plan ``plan_of()`` (ValueError naming
    ``--train-fraction`` when the log cannot be split) on the log ``batches()`` reads
    (:func:`app.evaluation.configrun.evaluate_config`, the code of the service's
    evaluations), with a progress bar."""
    from app.evaluation.configrun import evaluate_config
    from app.replay.output import progress_bar

    try:
        plan = plan_of()
    except ValueError as exc:
        raise ValueError(f"--train-fraction: {exc}") from None
    with progress_bar(plan.events, "log", unit="event",
                      enabled=False if args.no_progress else None) as step:
        result = evaluate_config(plan, batches, step)
    result.update(log=str(args.log), format=args.format, policy=args.policy,
                  bootstrap=args.bootstrap, train_fraction=args.train_fraction)
    return result


def label_source(path: str) -> tuple[int, int, Callable[[], Iterable[EventBatch]]]:
    """A noisyloop label log's events, labels (the largest plus one) and reader of its
    batches with their stream ids (JSON Lines or Parquet; ValueError naming ``--policy``
    for a rank log)."""
    from functools import partial

    from app.evaluation import servicelog

    if streamed(path):
        from app.evaluation import parquetlog

        files = parquetlog.log_files(path)
        events, n_actions = parquetlog.label_counts(files)
        return events, n_actions, partial(parquetlog.identified_batches, files, n_actions)
    events, n_actions = servicelog.label_counts(path)
    return events, n_actions, partial(servicelog.identified_batches, path, n_actions)


def exported_shape(path: str) -> LogShape:
    """The log shape of the noisyloop export at ``path`` (JSON Lines, or Parquet: a file, a
    directory or a glob): that of the task whose shape reads its first event line
    (:func:`app.tasks.log_shape_of`); when none does, the first evaluated task's, whose
    reader then says what the log lacks."""
    from app.tasks import TASKS, log_shape_of

    if streamed(path):
        require("pyarrow", PARQUET, "--log PARQUET")
        from app.evaluation import parquetlog

        line = parquetlog.first_event(parquetlog.log_files(path))
    else:
        from app.evaluation.servicelog import first_event

        line = first_event(path)
    found = log_shape_of(line)
    if found is not None:
        return found
    return next(task.log_shape for task in TASKS.values() if task.log_shape is not None)


def export_command(path: str) -> ModuleType:
    """The module that evaluates the noisyloop export at ``path``: its shape's
    (:attr:`~app.evaluation.shapes.LogShape.command`, ``run_export(args, policy)``;
    ValueError for a shape the command does not read)."""
    shape = exported_shape(path)
    if shape.command is None:
        raise ValueError(f"--log: {path}: the command does not evaluate this task's log "
                         "(its service evaluations do)")
    return importlib.import_module(shape.command)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The result JSON of ``evaluate`` (ValueError on bad input)."""
    import numpy as np

    from app.evaluation.estimators import per_position, reward_predictions
    from app.evaluation.rankings import RANK
    from app.evaluation.sums import row_keys
    from app.replay.output import progress_bar
    from app.sim.dsjson import is_cats_log

    cats = args.format == "dsjson" and is_cats_log(args.log)
    if (args.action_range is not None or args.bandwidth is not None) and not cats:
        raise ValueError("--action-range and --bandwidth need a dsjson CATS log (_label_ca)")
    if cats:
        from app.commands import evaluate_cats

        return evaluate_cats.run(args)
    policy = parse_policy(args.policy)
    if args.bootstrap < 1:
        raise ValueError("--bootstrap must be at least 1")
    if args.workers < 1:
        raise ValueError("--workers must be at least 1")
    if args.slot_rates is not None and args.format != "noisyloop":
        raise ValueError("--slot-rates needs --format noisyloop and a rank log")
    if args.skip_bad_lines and args.format != "dsjson":
        raise ValueError("--skip-bad-lines needs --format dsjson")
    if (args.workers > 1 or args.engine != "local") and not (
            args.format == "noisyloop" and streamed(args.log)):
        raise ValueError("--workers and --engine need --format noisyloop and a Parquet log")
    positions, split, counts, uniform = None, None, None, None
    pi_model: np.ndarray | None = None
    empirical = isinstance(policy, str) and policy.startswith("empirical:")
    model = isinstance(policy, str) and policy.partition(":")[0] in MODEL_KINDS
    if model and args.format not in ("noisyloop", "dsjson"):
        raise ValueError("--policy: model:SNAPSHOT_FILE needs --format noisyloop or dsjson")
    if isinstance(policy, str) and policy.startswith("config:"):
        label_log_only(args)
        if args.format == "noisyloop":
            shape = exported_shape(args.log)
            # (a rank log's configuration is replayed by the service, not by this command)
            if "configuration" not in shape.policies or shape.kind is RANK:
                raise ValueError("--policy: config:JSON needs a label log or a continuous log "
                                 "(this log's evaluations take no configuration)")
            return export_command(args.log).run_export(args, policy)
        log, pi_model, split = config_inputs(args, policy)
    elif args.format in ("vw", "dsjson"):
        if empirical:
            raise ValueError("--policy: empirical:FILE needs --format obd")
        read = file_log(args, policy)
        log, counts, positions, pi_model = read.log, read.counts, read.positions, read.pi
        uniform = read.uniform() if policy == "uniform" else None
    elif args.format == "noisyloop":
        if empirical:
            raise ValueError("--policy: empirical:FILE needs --format obd")
        return export_command(args.log).run_export(args, policy)
    else:
        log, items, positions = obd_log(args.log)
        if isinstance(policy, int):
            if policy not in items:
                raise ValueError(f"--policy: item {policy} not in item_context.csv")
            policy = items.index(policy)
    slots = [] if positions is None else sorted(set(positions.tolist()))
    pi: np.ndarray | None
    if empirical:
        assert isinstance(policy, str) and positions is not None
        pi = empirical_target(policy.partition(":")[2], items, positions)
    elif model or split is not None:
        pi = pi_model
    elif uniform is not None:
        pi = uniform
    else:
        pi = target(log, policy)
    slates = obd_slates(args.log) if args.format == "obd" else None
    total = args.bootstrap * (1 + len(slots))
    with progress_bar(total, "bootstrap", enabled=False if args.no_progress else None) as step:
        if positions is None:
            result = estimate(args, step, log, pi)
        else:  # one reward model for the log and its positions: their DR terms add up
            keys = row_keys(np.arange(log.n))
            q = reward_predictions(log, keys, stream_options(args))
            result = estimate(args, step, log, pi, keys, q)
            result["positions"] = per_position(log, pi, positions,
                                               functools.partial(estimate, args, step),
                                               keys, q)
        if slates is not None and policy in ("uniform", "logging"):
            result["slates"] = slate_result(slates, log.n_actions, policy == "uniform", args)
    result.update(log=str(args.log), format=args.format, policy=args.policy,
                  bootstrap=args.bootstrap)
    if split is not None:
        result.update(split=split, train_fraction=args.train_fraction)
    if counts is not None:
        result["dsjson"] = counts
    return result


def estimate(args: argparse.Namespace, step: Callable[[int], None], part: LabelLog,
             pi_part: np.ndarray | None, keys: np.ndarray | None = None,
             q: np.ndarray | None = None) -> dict[str, Any]:
    """IPS, SNIPS and DR of a label log ``part`` and its target ``pi_part`` (rows keyed by
    ``keys``, reward model ``q``), with the heavy-tail guard; ``step`` advances the
    progress bar per bootstrap resample."""
    from app.evaluation.estimators import evaluate
    from app.evaluation.heavy_tails import guard_label

    done = evaluate(part, pi_part, rho0=args.rho0, rho1=args.rho1, rho0_se=args.rho0_se,
                    rho1_se=args.rho1_se, n_boot=args.bootstrap, seed=args.seed,
                    progress=step, keys=keys, q=q).to_dict()
    return guard_label(done, [(part, pi_part)], stream_options(args))


def slot_rates(path: str | None) -> SlotRates | None:
    """The per-slot rates of ``--slot-rates`` (None without it; ValueError naming the
    option for a file that holds none)."""
    from app.evaluation.rates import SlotRates

    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return SlotRates.from_json(json.load(f))
    except (OSError, ValueError) as exc:
        raise ValueError(f"--slot-rates: {path}: {exc}") from None


def label_log_only(args: argparse.Namespace) -> None:
    """ValueError when ``--slot-rates`` is given for a label log."""
    if args.slot_rates is not None:
        raise ValueError("--slot-rates needs a rank log (a label log's clicks have no slot: "
                         "--rho0 --rho1)")


def slate_result(slates: tuple[np.ndarray, np.ndarray], n_items: int, uniform: bool,
                 args: argparse.Namespace) -> dict[str, Any]:
    """The ``slates`` field: RIPS and SNRIPS of the uniform (or logging) policy."""
    import numpy as np

    from app.evaluation.heavy_tails import guard_slate_log
    from app.evaluation.slates import evaluate_slates, uniform_cascade

    clicks, cascade = slates
    pi = uniform_cascade(clicks.shape[0], clicks.shape[1], n_items) if uniform else None
    out = evaluate_slates(clicks, cascade, pi, args.rho0, args.rho1, args.rho0_se,
                          args.rho1_se, n_boot=args.bootstrap, seed=args.seed).to_dict()
    del out["correction"]  # the same as the result's
    w = np.ones_like(cascade) if pi is None else pi / cascade
    return guard_slate_log(out, w, clicks, stream_options(args).rates())


#: The estimators a plot draws, in order, with their labels.
ESTIMATORS = {"ips": "IPS", "snips": "SNIPS", "dr": "DR"}


def plotted(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The estimates a plot draws, each with its label: a rank log's every slot (its
    top-level estimates are slot 0's), an OBD log's all positions together and each
    position, any other log's one set."""
    positions = result.get("positions") or []
    if "slot_impressions" in result:  # a rank log
        return [(f"slot {p['position']}", p) for p in positions]
    return [("all positions" if positions else "", result),
            *((f"position {p['position']}", p) for p in positions)]


def figure(result: dict[str, Any]) -> Any:
    """The estimates of :func:`plotted` with their intervals, side by side per estimator
    (a matplotlib figure; the caller closes it).  An estimator a log has none of is left
    out; one with no point estimate (``value`` null) is drawn as its interval alone, dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = plotted(result)
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(4.8 + 0.4 * len(series), 3.2), layout="constrained")
    try:
        for i, (label, found) in enumerate(series):
            offset = (i - (len(series) - 1) / 2) * width
            drawn = [(k + offset, found[n]) for k, n in enumerate(ESTIMATORS)
                     if found.get(n) is not None]
            shown = [(x, e) for x, e in drawn if e["value"] is not None]
            bars = ax.errorbar([x for x, _ in shown], [e["value"] for _, e in shown],
                               yerr=[[e["value"] - e["ci_low"] for _, e in shown],
                                     [e["ci_high"] - e["value"] for _, e in shown]],
                               fmt="o", capsize=4, label=label or None)
            for x, e in drawn:  # no point estimate: its interval alone, dashed
                if e["value"] is None and e.get("ci_low") is not None:
                    ax.vlines(x, e["ci_low"], e["ci_high"], colors=bars[0].get_color(),
                              linestyles="dashed")
        ax.set_xticks(range(len(ESTIMATORS)), list(ESTIMATORS.values()))
        ax.set_xlim(-0.5, len(ESTIMATORS) - 0.5)
        ax.set_ylabel("estimated value (95% interval)")
        reward = "h(f)" if result["correction"]["rho0"] is not None else "raw clicks"
        ax.set_title(f"policy {result['policy']} on {Path(result['log']).name}\n"
                     f"n = {result['n']:,}, ESS = {result['ess']:,.0f}, {reward}", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        if len(series) > 1:
            ax.legend(fontsize=8)
    except BaseException:
        plt.close(fig)
        raise
    return fig


def plot(result: dict[str, Any], path: str) -> None:
    """:func:`figure` as a PNG."""
    import matplotlib.pyplot as plt

    from app.replay.output import save_figure

    fig = figure(result)
    try:
        save_figure(fig, path)
    finally:
        plt.close(fig)


def handle(args: argparse.Namespace) -> int:
    """Evaluate, print the JSON, write it and the plot; 2 on bad input."""
    if args.plot:
        require("matplotlib", LAB, "--plot")
        require("oxipng", LAB, "--plot")
    try:
        result = run(args)
    except (ValueError, OSError) as exc:
        print(f"noisyloop evaluate: error: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(result, allow_nan=False)
    print(text)
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    if args.plot:
        plot(result, args.plot)
    return 0
