"""``noisyloop evaluate`` of a noisyloop continuous log: the command's entry of the continuous
shape (:attr:`app.tasks.continuous.ContinuousShape.command`).

A continuous log is evaluated with its model's configuration: the action range, the
smoothing bandwidth of ``fixed:VALUE`` and ``model``, and the click-noise rates its clicks
are corrected by.  The log does not hold them; the model's saved snapshot (``GET
/v1/models/{id}/snapshot``) does: ``--policy model:SNAPSHOT_FILE`` evaluates that model's
greedy action smoothed with its bandwidth, and ``uniform``, ``logging``, ``fixed:VALUE``
and ``config:JSON`` (a new learner trained on the first ``--train-fraction`` of the events,
evaluated on the rest: :mod:`app.evaluation.configrun`) take the snapshot from
``--model-snapshot``.  The log (JSON Lines, or Parquet: a file, a
directory or a glob) is read in batches of lines, keyed by their positions, through the
code of the service's evaluations (the shape's two passes, :mod:`app.evaluation.smoothed`),
so the numbers are the service's on the same log.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, cast

from app.commands.evaluate import (
    MODEL_KINDS,
    check_config_run,
    parse_config,
    run_config_plan,
    streamed,
)
from app.store.noise import NO_ESTIMATOR

if TYPE_CHECKING:
    from app.evaluation.estimators import Options
    from app.evaluation.shapes import ConfigShape
    from app.learners.config import ModelConfig

#: Lines of the log per batch.
BATCH_LINES = 10_000


def run_export(args: argparse.Namespace, policy: str | int) -> dict[str, Any]:
    """The result JSON of ``evaluate`` on the continuous log ``--log`` for ``policy``
    (ValueError naming the argument that is missing or wrong)."""
    from app.evaluation.estimators import Options
    from app.evaluation.servicelog import snapshot_learner
    from app.evaluation.streaming import accumulate, fit_reward_model
    from app.tasks import get_task

    kind, _, snapshot = policy.partition(":") if isinstance(policy, str) else ("", "", "")
    if kind == "model-greedy":
        raise ValueError("--policy: a continuous log takes model:SNAPSHOT_FILE (the model's "
                         "greedy action smoothed with its bandwidth)")
    model = kind in MODEL_KINDS
    path = snapshot if model else args.model_snapshot
    if path is None:
        raise ValueError("--model-snapshot: a continuous log is evaluated with its model's "
                         "action range, bandwidth and noise rates: give its saved snapshot "
                         "(GET /v1/models/{id}/snapshot)")
    if kind == "config":
        check_config_run(args)
    elif args.workers > 1 or args.engine != "local":
        raise ValueError("--workers/--engine: a continuous log is read in this process")
    if args.rho0 is not None or args.rho1 is not None:
        raise ValueError("--rho0/--rho1: a continuous log's clicks are corrected by the "
                         "model's configured rates (its snapshot's)")
    learner, config = snapshot_learner(path)
    if config.task != "continuous":
        raise ValueError(f"--model-snapshot: {path}: a {config.task!r} model's snapshot, not "
                         "a continuous model's")
    shape = get_task("continuous").log_shape
    assert shape is not None
    rho0, rho1 = config.initial_noise_rates  # what a click was corrected by (None: not)
    corrected = rho0 > 0 or rho1 > 0
    options = Options(rho0=rho0 if corrected else None, rho1=rho1 if corrected else None,
                      n_boot=args.bootstrap, seed=args.seed)
    flags: dict[str, Any] = {"correction": {"rho0": rho0 if corrected else None,
                            "rho1": rho1 if corrected else None}}
    if corrected:  # rates no estimator checks for this task, as the service flags them
        flags.update(calibration_unreliable=True, reason=NO_ESTIMATOR)
    if kind == "config":
        return {**_config_run(args, str(policy), cast("ConfigShape", shape), config, options),
                **flags}
    name = "model" if model else policy if isinstance(policy, str) else f"fixed:{policy}"
    target = shape.policy(name, config, learner.get_state() if model else None)

    def batches() -> Iterator[tuple[Any, Any]]:
        first = 0
        for records in _record_chunks(args.log):
            batch = shape.batch(records, first, config, str(args.log))
            first += len(records)
            if batch is not None:
                yield batch

    fitted = fit_reward_model(batches(), options, kind=shape.kind)
    result = shape.result(accumulate(batches(), target, fitted, options, kind=shape.kind),
                          options, None)
    result.update(log=str(args.log), format=args.format, policy=args.policy,
                  bootstrap=args.bootstrap, **flags)
    return result


def _config_run(args: argparse.Namespace, policy: str, shape: ConfigShape,
                config: ModelConfig, options: Options) -> dict[str, Any]:
    """The result JSON of ``config:JSON`` on the continuous log ``--log`` of the model of
    ``config``: a pass counts its events, then the configuration learns the first
    ``--train-fraction`` of them and is evaluated on the rest, read in batches (the code of
    the service's evaluations)."""
    from app.evaluation.configrun import ConfigPlan

    configuration = parse_config(policy)
    events = sum(_is_event(r) for records in _record_chunks(args.log) for r in records)

    def batches() -> Iterator[tuple[Any, tuple[str, ...]]]:
        for records in _record_chunks(args.log):
            lines = [r for r in records if _is_event(r)]
            if lines:
                yield shape.identified(lines, config, str(args.log))

    return run_config_plan(args, lambda: ConfigPlan.of(
        configuration, config.task, config.n_classes, options, events, args.train_fraction,
        shape=shape, inherited=shape.inherited(config)), batches)


def _is_event(record: Any) -> bool:
    return isinstance(record, dict) and record.get("type") == "event"


def _record_chunks(path: str) -> Iterator[list[dict[str, Any]]]:
    """The log's lines (JSON Lines) or rows (Parquet, as their lines) in order, in chunks of
    :data:`BATCH_LINES`."""
    if streamed(path):
        import pyarrow.parquet as pq

        from app.evaluation import parquetlog

        for file in parquetlog.log_files(path):
            for batch in pq.ParquetFile(file).iter_batches(batch_size=BATCH_LINES):
                yield batch.to_pylist()
        return
    from app.evaluation.servicelog import read_lines

    lines = read_lines(path)
    while chunk := list(islice(lines, BATCH_LINES)):
        yield chunk
