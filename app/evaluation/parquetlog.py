"""Exported decision logs in Parquet (``noisyloop log export --format parquet``) as streams
of label batches, read with :mod:`pyarrow.dataset` (the optional ``parquet`` extra).

A log is a Parquet file, a directory of them (searched recursively, as the
export's day partitions lay them out) or a glob; its files in sorted path
order, each row a line of the export (:mod:`app.store.logrecords`).  A
*part* (:class:`Part`) is a row group of a file; a label batch holds the
rows of type ``event`` with their ``features``, ``action``, ``propensity``
and ``feedback.click``, keyed by their row in the log, the files' rows one
after the other (:func:`app.evaluation.sums.row_keys`: a JSON Lines export
of the same log gets the same keys).  Only the needed columns are read, a
batch of at most :data:`BATCH_ROWS` rows at a time.
"""

from __future__ import annotations

import glob
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.evaluation.estimators import LabelLog
from app.evaluation.sums import row_keys

#: Rows read at a time.
BATCH_ROWS = 65_536
#: The four magic bytes that open (and close) a Parquet file.
MAGIC = b"PAR1"


def is_parquet(path: str) -> bool:
    """Whether ``path`` names Parquet: a directory, a glob, or a file that opens with
    :data:`MAGIC`."""
    if glob.has_magic(path) or Path(path).is_dir():
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def log_files(path: str) -> list[str]:
    """The Parquet files of ``path`` (module docstring), sorted (ValueError when none)."""
    if glob.has_magic(path):
        files = sorted(glob.glob(path, recursive=True))
    elif Path(path).is_dir():
        files = sorted(str(p) for p in Path(path).rglob("*.parquet"))
    else:
        files = [path]
    if not files:
        raise ValueError(f"{path}: no Parquet files")
    return files


@dataclass(frozen=True)
class Part:
    """A row group of a log's file."""

    file: str
    row_group: int
    first_row: int
    """The row group's first row in the log."""
    rows: int


def parts(files: list[str]) -> list[Part]:
    """Every row group of ``files`` in order (from the files' footers only)."""
    import pyarrow.parquet as pq

    out = []
    first = 0
    for file in files:
        meta = pq.ParquetFile(file).metadata
        for g in range(meta.num_row_groups):
            rows = meta.row_group(g).num_rows
            out.append(Part(file, g, first, rows))
            first += rows
    return out


def _columns(schema: Any) -> dict[str, Any]:
    """The projection of a label batch (ValueError naming a missing column)."""
    import pyarrow.dataset as ds

    missing = [c for c in ("type", "features", "action", "propensity", "feedback")
               if schema.get_field_index(c) < 0]
    if missing:
        raise ValueError(f"not a label log of `noisyloop log export` (no column "
                         f"{', '.join(missing)})")
    columns = {name: ds.field(name) for name in ("type", "features", "action", "propensity")}
    columns["click"] = ds.field("feedback", "click")
    return columns


def _fragment(part: Part) -> Any:
    import pyarrow.dataset as ds

    fragment = next(iter(ds.dataset(part.file, format="parquet").get_fragments()))
    return fragment.subset(row_group_ids=[part.row_group])


def label_batches(part: Part, n_actions: int) -> Iterator[tuple[LabelLog, np.ndarray]]:
    """The label events of ``part`` in batches with their keys (ValueError for a file that
    is not a label log's export or rows it cannot evaluate)."""
    fragment = _fragment(part)
    first = part.first_row
    for batch in fragment.to_batches(columns=_columns(fragment.physical_schema),
                                     batch_size=BATCH_ROWS):
        n = batch.num_rows
        event = np.asarray(batch.column("type").to_numpy(zero_copy_only=False) == "event")
        rows = np.flatnonzero(event)
        first += n
        if not len(rows):
            continue
        events = batch.take(rows) if len(rows) < n else batch
        try:
            log = _label_log(events, n_actions)
        except ValueError as exc:
            raise ValueError(f"{part.file}: {exc}") from None
        yield log, row_keys(rows + (first - n))


def _label_log(batch: Any, n_actions: int) -> LabelLog:
    import pyarrow.compute as pc

    for name in ("features", "action", "propensity", "click"):
        if batch.column(name).null_count:
            raise ValueError(f"an event without {name}")
    features = batch.column("features")
    lengths = pc.list_value_length(features).to_numpy()
    d = int(lengths[0])
    if np.any(lengths != d):
        raise ValueError("events with features of different lengths")
    X = np.asarray(features.flatten().to_numpy(), dtype=np.float64).reshape(-1, d)
    return LabelLog(X=X, actions=np.asarray(batch.column("action").to_numpy(), dtype=np.int64),
                    propensities=np.asarray(batch.column("propensity").to_numpy(),
                                            dtype=np.float64),
                    rewards=np.asarray(batch.column("click").to_numpy(), dtype=np.float64),
                    n_actions=n_actions)


def label_actions(files: list[str]) -> int:
    """The largest ``action`` or ``greedy_action`` of the log plus one (one pass over those
    two columns)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    dataset = ds.dataset(files, format="parquet")
    names = [c for c in ("action", "greedy_action") if c in dataset.schema.names]
    largest = -1
    for batch in dataset.to_batches(columns=names, batch_size=BATCH_ROWS):
        for name in names:
            value = pc.max(batch.column(name)).as_py()
            largest = max(largest, -1 if value is None else int(value))
    if largest < 0:
        raise ValueError("no events (is it a `noisyloop log export` file?)")
    return largest + 1


def ranked(files: list[str]) -> bool:
    """Whether the log is a rank log (its lines have ``slots``)."""
    import pyarrow.parquet as pq

    return "slots" in pq.read_schema(files[0]).names


def records(files: list[str]) -> Iterator[dict[str, Any]]:
    """The log's lines as records, batch by batch (for the in-memory readers: rank logs,
    configurations trained on the log)."""
    import pyarrow.dataset as ds

    for file in files:
        for batch in ds.dataset(file, format="parquet").to_batches(batch_size=BATCH_ROWS):
            yield from batch.to_pylist()
