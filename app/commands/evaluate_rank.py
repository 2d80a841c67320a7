"""``noisyloop evaluate`` of a noisyloop rank log: the command's entry of the rank shape
(:attr:`app.evaluation.shapes.RankShape.command`).

The log (JSON Lines, or Parquet: a file, a directory or a glob) is streamed in batches over
``--workers`` processes or a Spark cluster, through the code of the service's evaluations
(:mod:`app.evaluation.rankings`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.commands.evaluate import MODEL_KINDS, model_policy, slot_rates, stream_options, streamed
from app.optional import SPARK, require

if TYPE_CHECKING:
    from app.evaluation.streaming import P, Reader


def run_export(args: argparse.Namespace, policy: str | int) -> dict[str, Any]:
    """The result JSON of ``evaluate`` on the rank log ``--log`` for ``policy``."""
    if streamed(args.log):
        from app.evaluation import parquetlog

        files = parquetlog.log_files(args.log)
        model = model_policy(policy) is not None
        parts = parquetlog.parts(files)
        return rank_run(args, parts, parquetlog.rank_batches, sum(p.rows for p in parts),
                        model)
    from app.evaluation.servicelog import rank_batches

    kind = policy.partition(":")[0] if isinstance(policy, str) else ""
    return rank_run(args, [args.log], rank_batches, None, kind in MODEL_KINDS)


def rank_run(args: argparse.Namespace, parts: Sequence[P], reader: Reader[P],
             total: int | None, model: bool) -> dict[str, Any]:
    """The result JSON of ``evaluate`` on a noisyloop rank log made of ``parts`` (``total``
    lines), streamed in batches over ``--workers`` processes (the code of the service's
    evaluations, :mod:`app.evaluation.rankings`; ValueError naming the policies it takes)."""
    from app.evaluation.rankings import evaluate_ranking_parts, rank_policy
    from app.evaluation.streaming import sum_parts
    from app.replay.output import progress_bar

    if model:
        raise ValueError("--policy: model:SNAPSHOT_FILE needs a label log (a rank log holds "
                         "only the shown candidates, not every one the model ranked)")
    policy = rank_policy(args.policy)
    engine = sum_parts
    if args.engine == "spark":
        require("pyspark", SPARK, "--engine spark")
        from app.evaluation.spark import sum_parts_spark as engine
    options = stream_options(args, slot_rates(args.slot_rates))
    options.correction()  # refuse unusable rates before reading the log
    with progress_bar(total, "log", unit="row",
                      enabled=False if args.no_progress else None) as step:
        result = evaluate_ranking_parts(parts, reader, policy, options, args.workers, step,
                                        engine)
    result.update(log=str(args.log), format=args.format, policy=args.policy,
                  bootstrap=args.bootstrap)
    return result
