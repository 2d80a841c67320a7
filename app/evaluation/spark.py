"""Label evaluations of a Parquet log on Spark (``noisyloop evaluate --engine spark``, the
optional ``spark`` extra).

The driver fits the reward model on the log's first events (as the local
engine does, :func:`app.evaluation.streaming.fit_reward_model`), then one
Spark task per row group (:class:`app.evaluation.parquetlog.Part`) reads its
rows with pyarrow and adds them into a
:class:`~app.evaluation.estimators.LabelSums` inside ``mapInArrow``, which
hands it back as one pickled row; the driver merges them in the log's order.
The sums and the events' keys are the local engine's, so are the estimates
(up to rounding).  The files must be readable from every executor (a local
path for ``local[N]``, a shared file system on a cluster).  The master is
``SPARK_MASTER`` (default ``local[*]``).
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Iterator
from functools import partial
from typing import Any

from app.evaluation import parquetlog
from app.evaluation.estimators import Evaluation, LabelSums, Options
from app.evaluation.reward_model import RidgeModel
from app.evaluation.streaming import Policy, accumulate, fit_reward_model


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


def _task(batches: Iterator[Any], parts: list[parquetlog.Part], n_actions: int,
          policy: Policy, model: RidgeModel, options: Options) -> Iterator[Any]:
    """A Spark task: the sums of the parts whose indices it is given, one row each."""
    import pyarrow as pa

    for batch in batches:
        for index in batch.column("part").to_pylist():
            sums = accumulate(parquetlog.label_batches(parts[index], n_actions), policy,
                              model, options)
            yield pa.record_batch({"part": pa.array([index], pa.int32()),
                                   "sums": pa.array([pickle.dumps(sums)], pa.binary())})


def evaluate_spark(files: list[str], n_actions: int, policy: Policy, options: Options,
                   master: str | None = None) -> Evaluation:
    """IPS, SNIPS and DR of ``policy`` on the Parquet ``files`` (module docstring)."""
    parts = parquetlog.parts(files)
    reader = partial(parquetlog.label_batches, n_actions=n_actions)
    model = fit_reward_model((batch for part in parts for batch in reader(part)), options)
    spark = session(master)
    frame = spark.createDataFrame([(i,) for i in range(len(parts))], "part int")
    task = partial(_task, parts=parts, n_actions=n_actions, policy=policy, model=model,
                   options=options)
    rows = frame.repartition(len(parts)).mapInArrow(task, "part int, sums binary").collect()
    total = LabelSums.zeros()
    for row in sorted(rows, key=lambda r: r["part"]):
        total.merge(pickle.loads(row["sums"]))
    return total.evaluation(options)
