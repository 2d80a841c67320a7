"""``noisyloop replay``: run a data set through a learner with simulated feedback.

The common options live here; each task's runner module
(the :class:`~app.tasks.base.Replay` of each task of :data:`app.tasks.TASKS`) contributes its own
option group with ``add_arguments(group)`` (and may name options of another
task's group it reads too, ``SHARED_OPTIONS``) and does the run with
``run(args, seed, progress) -> ReplayResult``.  The task is ``--task`` or is
inferred from ``--algorithm`` (see :func:`infer_task`).  Repeats use seeds
``seed .. seed + repeats - 1``; the summary (mean curve, band over runs) is
printed, written as JSON (``--json``) and plotted (``--plot``), see
:mod:`app.replay.output`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from app.commands.deferred import add_later
from app.learners.base import ParamError
from app.learners.registry import ALGORITHMS, algorithms
from app.optional import CLIENT, LAB, require
from app.replay import drift
from app.replay.output import (
    METRIC_NOTES,
    plot,
    progress_bar,
    run_repeats,
    summarise,
    write_json,
)
from app.replay.result import ReplayResult

if TYPE_CHECKING:
    from app.tasks import Replay


def replayed() -> dict[str, Replay]:
    """The tasks that ``replay`` can run, with how, in registry order (the order that breaks
    ties when an algorithm serves several tasks: ``perceptron``, label before noisy_label).
    Imported when the command is used: the tasks' modules import the API's schemas."""
    from app.tasks import TASKS

    return {name: task.replay for name, task in TASKS.items() if task.replay is not None}


def runner_module(task: str) -> ModuleType:
    """The runner module of ``task`` (its :attr:`~app.tasks.base.Replay.runner`)."""
    return importlib.import_module(replayed()[task].runner)


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"gamma\": 0.1}'")
    return value


def register(subparsers: Any) -> None:
    """Add the ``replay`` parser; its options (every task's group) when it is used."""
    parser = subparsers.add_parser(
        "replay", allow_abbrev=False,
        help="replay a data set through a learner with simulated noisy feedback",
        description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_later(parser, add_arguments)
    parser.set_defaults(handler=handle)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The common options and every task's option group."""
    tasks = list(replayed())
    common = parser.add_argument_group("common options")
    common.add_argument("--dataset", required=True,
                        help="data set name (synsep, digits, ...) or CSV path; rank: "
                             "sim, vw:PATH or obd:PATH (a log, replayed)")
    common.add_argument("--algorithm", default=None,
                        help="learner, e.g. rcnbf, rcine, banditron, mc_dbf, ors, uma")
    common.add_argument("--task", choices=tasks, default=None,
                        help="task (default: inferred from --algorithm)")
    common.add_argument("--rounds", type=int, default=None,
                        help="rounds to replay (default: the task's)")
    common.add_argument("--seed", type=int, default=0, help="seed of the first run (default 0)")
    common.add_argument("--repeats", type=int, default=1,
                        help="independent runs with seeds seed..seed+K-1, averaged (default 1)")
    common.add_argument("--json", default=None, metavar="FILE", help="write the summary as JSON")
    common.add_argument("--plot", default=None, metavar="FILE.png",
                        help="plot the learning curve (log-log; a share or a reward, such "
                             "as rank's gap_closed, on a linear y axis)")
    common.add_argument("--no-normalise", action="store_true",
                        help="keep raw features (default: rows scaled to unit L2 norm)")
    common.add_argument("--params", type=_json_object, default=None, metavar="JSON",
                        help="extra learner hyper-parameters as a JSON object")
    common.add_argument("--service", default=None, metavar="URL",
                        help="replay through a running noisyloop service "
                             f"({' and '.join(_served())} tasks; batches of --feedback-delay "
                             "rounds)")
    common.add_argument("--api-key", default=None, metavar="KEY", help="API key for --service")
    common.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    drift.add_arguments(common)
    owners: dict[str, tuple[str, ...]] = {}
    seen: set[str] = set()
    for task in tasks:
        module = runner_module(task)
        if module.__name__ in seen:
            continue
        seen.add(module.__name__)
        served = tuple(t for t in tasks if runner_module(t) is module)
        group = parser.add_argument_group(f"{' / '.join(served)} options")
        module.add_arguments(group)
        for action in group._group_actions:
            owners[action.dest] = served
    for task in tasks:  # options of another task's group that a runner reads too
        for dest in getattr(runner_module(task), "SHARED_OPTIONS", ()):
            owners[dest] = (*owners[dest], task)
    parser.set_defaults(_option_tasks=owners, _defaults={
        a.dest: a.default for a in parser._actions})


def _served() -> tuple[str, ...]:
    """The tasks ``--service`` replays."""
    return tuple(name for name, replay in replayed().items() if replay.service)


def _explicit(args: argparse.Namespace) -> dict[str, tuple[str, ...]]:
    """Task options given with a non-default value, with the tasks they belong to."""
    return {dest: tasks for dest, tasks in args._option_tasks.items()
            if getattr(args, dest) != args._defaults.get(dest)}


def infer_task(args: argparse.Namespace) -> str:
    """``--task``, or the task of ``--algorithm``.

    An algorithm that serves several tasks (``perceptron``: label and
    noisy_label) runs the task whose options were given, else the first in
    :func:`replayed`.  Raises :class:`ParamError` with the choices.
    """
    explicit = _explicit(args)
    if args.task is not None:
        if args.algorithm is not None and (args.task, args.algorithm) not in ALGORITHMS:
            raise ParamError("--algorithm", f"{args.algorithm!r} does not fit task "
                             f"{args.task!r}; choose one of {algorithms(args.task)}")
        return str(args.task)
    if args.algorithm is None:
        raise ParamError("--algorithm", "give --algorithm (or --task to use its default "
                         "algorithm)")
    tasks = replayed()
    candidates = [t for t in tasks if (t, args.algorithm) in ALGORITHMS]
    if not candidates:
        known = sorted({alg for t, alg in ALGORITHMS if t in tasks})
        raise ParamError("--algorithm", f"unknown algorithm {args.algorithm!r}; "
                         f"choose one of {known}")
    wanted = [t for t in candidates if any(t in tasks for tasks in explicit.values())]
    if len(wanted) > 1:
        raise ParamError("--task", f"{args.algorithm!r} serves {wanted}; say which with --task")
    return wanted[0] if wanted else candidates[0]


def check_options(args: argparse.Namespace, task: str) -> None:
    """Refuse options of other tasks (they would be silently ignored)."""
    for dest, tasks in _explicit(args).items():
        if task not in tasks:
            flag = "--" + dest.replace("_", "-")
            raise ParamError(flag, f"is an option of the {'/'.join(tasks)} task, but "
                             f"{args.algorithm or 'this replay'!s} runs the {task} task")


def _validate(args: argparse.Namespace) -> None:
    if args.api_key is not None and args.service is None:
        raise ParamError("--api-key", "is only used with --service URL")
    if args.service is not None and not args.api_key:
        raise ParamError("--api-key", "is required with --service (a tenant's API key)")
    if args.repeats < 1:
        raise ParamError("--repeats", f"must be >= 1, got {args.repeats}")
    if args.rounds is not None and args.rounds < 1:
        raise ParamError("--rounds", f"must be >= 1, got {args.rounds}")


def replay(args: argparse.Namespace, advance: Callable[[int], None] | None = None
           ) -> tuple[str, list[ReplayResult], float, float]:
    """Validate, infer the task and run all repeats.

    Returns the task, the runs, and the wall-clock and CPU seconds they took
    (data loading included; on a shared machine the CPU time is the stable
    one).
    """
    _validate(args)
    task = infer_task(args)
    check_options(args, task)
    args.task = task
    drift.check_task(args, task, tuple(t for t, r in replayed().items() if r.drift))
    module = runner_module(task)
    if args.service is not None:
        if not replayed()[task].service:
            raise ParamError("--service", f"replay through a service supports the tasks "
                             f"{_served()}, not {task!r}")
        module = importlib.import_module("app.replay.service")
    start, cpu = time.perf_counter(), time.process_time()
    results = run_repeats(lambda seed, progress: module.run(args, seed, progress),
                          args.seed, args.repeats, advance or (lambda n: None))
    return task, results, time.perf_counter() - start, time.process_time() - cpu


def handle(args: argparse.Namespace) -> int:
    """Run the replay, print the summary, write JSON and plot; 2 on a usage error."""
    if args.plot:
        require("matplotlib", LAB, "--plot")
        require("oxipng", LAB, "--plot")
    service_errors: tuple[type[Exception], ...] = ()
    if args.service is not None:  # the HTTP client (httpx) only for --service
        service_errors = (require("noisyloop_client", CLIENT, "--service").NoisyloopError,)
    try:
        _validate(args)
        task = infer_task(args)
        module = runner_module(task)
        default = getattr(module, "default_rounds", None)
        rounds = args.rounds or (default(args) if default is not None
                                 else getattr(module, "DEFAULT_ROUNDS", None))
        total = rounds * args.repeats if rounds else None
        desc = f"{args.algorithm or task} on {args.dataset}"
        with progress_bar(total, desc, enabled=False if args.no_progress else None) as advance:
            task, results, seconds, cpu = replay(args, advance)
    except (ParamError, ValueError) as exc:
        print(f"noisyloop replay: error: {exc}", file=sys.stderr)
        return 2
    except service_errors as exc:
        print(f"noisyloop replay: service error: {exc}", file=sys.stderr)
        return 1
    summary = summarise(results, task=task, seconds=seconds, cpu_seconds=cpu)
    n = sum(r.rounds for r in results)
    over = results[0].extra.get("final_over")
    print(f"{summary.algorithm} on {summary.dataset} ({task}): final {summary.metric} "
          f"{summary.final:.4g}" + (f" ± {summary.final_std:.2g} (sd over {len(results)} runs)"
                                     if len(results) > 1 else "")
          + (f" (mean over {over})" if over else "")
          + f"; {summary.rounds} rounds, {seconds:.1f} s ({n / seconds:,.0f} rounds/s), "
          f"CPU {cpu:.1f} s ({n / max(cpu, 1e-9):,.0f} rounds/CPU-s)")
    if summary.metric in METRIC_NOTES:
        print(METRIC_NOTES[summary.metric])
    if args.json:
        write_json(summary, args.json)
    if args.plot and args.drift != "none":
        drift.plot_online(results, args.plot, f"{summary.algorithm} on {summary.dataset}")
    elif args.plot:
        plot([summary], args.plot)
    return 0
