"""Evaluations of a Parquet log on Spark (``noisyloop evaluate --engine spark``, the
optional ``spark`` extra).

The driver fits the reward model on the log's first events (as the local
engine does, :func:`app.evaluation.streaming.fit_reward_model`), then one
Spark task per row group (:class:`app.evaluation.parquetlog.Part`) reads its
rows with pyarrow and adds them into a
:class:`~app.evaluation.estimators.LabelSums` (a rank log's
:class:`~app.evaluation.rankings.RankSums`) inside ``mapInArrow``, which
hands it back as one pickled row; the driver merges them in the log's order.
The sums and the events' keys are the local engine's, so are the estimates
(up to rounding); a rank log's thin slots take their extra pass on the driver
(:func:`app.evaluation.rankings.evaluate_ranking_parts`).  The files must be
readable from every executor (a local path for ``local[N]``, a shared file
system on a cluster).  The master is
``SPARK_MASTER`` (default ``local[*]``).
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

from app.evaluation import parquetlog
from app.evaluation.estimators import LABEL, Evaluation, LabelSums, Options
from app.evaluation.streaming import Policy, Reader, accumulate, chain, fit_reward_model
from app.evaluation.sums import Kind


def session(master: str | None = None) -> Any:
    """The Spark session (``master``, else ``SPARK_MASTER``, else ``local[*]``); its Python
    workers run this interpreter unless ``PYSPARK_PYTHON`` says otherwise."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (SparkSession.builder.master(master or os.environ.get("SPARK_MASTER", "local[*]"))
            .appName("noisyloop-evaluate")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())


def stop_session(spark: Any) -> None:
    """Stop ``spark`` and the JVM pyspark launched for it: ``SparkSession.stop`` leaves that
    process running until the interpreter exits, which a long-lived caller (a test run, a
    notebook) would otherwise inherit."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    if gateway is None:
        return
    gateway.shutdown()
    launched = getattr(gateway, "proc", None)
    if launched is not None:
        launched.terminate()
        launched.wait(timeout=60)
    SparkContext._gateway = None
    SparkContext._jvm = None


def _task(batches: Iterator[Any], parts: list[Any], reader: Reader[Any], policy: Policy,
          model: Any, options: Options, kind: Kind) -> Iterator[Any]:
    """A Spark task: the sums of the parts whose indices it is given, one row each."""
    import pyarrow as pa

    for batch in batches:
        for index in batch.column("part").to_pylist():
            sums = accumulate(reader(parts[index]), policy, model, options, kind=kind)
            yield pa.record_batch({"part": pa.array([index], pa.int32()),
                                   "sums": pa.array([pickle.dumps(sums)], pa.binary())})


def sum_parts_spark(parts: Sequence[Any], reader: Reader[Any], policy: Policy,
                    options: Options, workers: int = 1,
                    progress: Callable[[int], None] | None = None, *, kind: Kind,
                    master: str | None = None) -> Any:
    """:func:`app.evaluation.streaming.sum_parts` with its second pass in Spark tasks, one
    per part, merged in the log's order (``workers`` goes unused: Spark's executors share
    the pass)."""
    model = fit_reward_model(chain(parts, reader), options, kind=kind)
    spark = session(master)
    frame = spark.createDataFrame([(i,) for i in range(len(parts))], "part int")
    task = partial(_task, parts=list(parts), reader=reader, policy=policy, model=model,
                   options=options, kind=kind)
    rows = frame.repartition(len(parts)).mapInArrow(task, "part int, sums binary").collect()
    total = kind.zeros()
    for row in sorted(rows, key=lambda r: r["part"]):
        part_sums = pickle.loads(row["sums"])
        total.merge(part_sums)
        if progress is not None:
            progress(part_sums.n)
    return total


def evaluate_spark(files: list[str], n_actions: int, policy: Policy, options: Options,
                   master: str | None = None) -> Evaluation:
    """IPS, SNIPS and DR of ``policy`` on the Parquet label log ``files`` (module docstring)."""
    reader = partial(parquetlog.label_batches, n_actions=n_actions)
    sums: LabelSums = sum_parts_spark(parquetlog.parts(files), reader, policy, options,
                                      kind=LABEL, master=master)
    return sums.evaluation(options)
