"""``noisyloop evaluate`` of a noisyloop label log: the command's entry of the label shape
(:attr:`app.evaluation.shapes.LabelShape.command`).

A JSON Lines log is read into memory and evaluated per event as a VW log is; a Parquet log
(a file, a directory or a glob) is streamed in batches over ``--workers`` processes or a
Spark cluster.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from app.commands.evaluate import (
    config_run,
    estimate,
    label_log_only,
    label_policy,
    model_policy,
    stream_options,
    streamed,
    target,
)
from app.optional import SPARK, require

if TYPE_CHECKING:
    import numpy as np

    from app.evaluation.servicelog import ServiceLog


def run_export(args: argparse.Namespace, policy: str | int) -> dict[str, Any]:
    """The result JSON of ``evaluate`` on the label log ``--log`` for ``policy``."""
    from app.replay.output import progress_bar

    if isinstance(policy, str) and policy.startswith("config:"):
        return config_run(args, policy)
    if streamed(args.log):
        return stream_run(args, policy)
    read, pi_model = noisyloop_inputs(args.log, policy)
    label_log_only(args)
    log = read.label_log()
    pi = target(log, policy) if pi_model is None else pi_model
    with progress_bar(args.bootstrap, "bootstrap",
                      enabled=False if args.no_progress else None) as step:
        result = estimate(args, step, log, pi, read.keys)
    result.update(log=str(args.log), format=args.format, policy=args.policy,
                  bootstrap=args.bootstrap)
    return result


def noisyloop_inputs(path: str, policy: str | int) -> tuple[ServiceLog, np.ndarray | None]:
    """A noisyloop label log and, for ``model:FILE`` or ``model-greedy:FILE``, the model's
    ``n x K`` matrix on it."""
    from app.evaluation.servicelog import read_label_log

    model = model_policy(policy)
    if model is None:
        return read_label_log(path), None
    pi, n_classes = model
    read = read_label_log(path, n_classes)
    return read, pi(read.label_log())


def stream_run(args: argparse.Namespace, policy: str | int) -> dict[str, Any]:
    """The result JSON of ``evaluate`` on a Parquet label log streamed in batches (over
    ``--workers`` processes or Spark)."""
    from functools import partial

    from app.evaluation import parquetlog
    from app.evaluation.heavy_tails import guard_label
    from app.evaluation.streaming import chain, evaluate_parts
    from app.replay.output import progress_bar

    files = parquetlog.log_files(args.log)
    model = model_policy(policy)
    parts = parquetlog.parts(files)
    total = sum(p.rows for p in parts)
    label_log_only(args)
    pi, n_actions = (label_policy(policy), None) if model is None else model
    n_actions = n_actions or parquetlog.label_counts(files)[1]
    reader = partial(parquetlog.label_batches, n_actions=n_actions)
    options = stream_options(args)
    with progress_bar(total, "log", unit="row",
                      enabled=False if args.no_progress else None) as step:
        if args.engine == "spark":
            require("pyspark", SPARK, "--engine spark")
            from app.evaluation.spark import evaluate_spark

            evaluation = evaluate_spark(files, n_actions, pi, options)
        else:
            evaluation = evaluate_parts(parts, reader, pi, options, args.workers, step)
    result = guard_label(evaluation.to_dict(),
                         ((log, pi(log)) for log, _ in chain(parts, reader)), options)
    result.update(log=str(args.log), format=args.format, policy=args.policy,
                  bootstrap=args.bootstrap)
    return result
