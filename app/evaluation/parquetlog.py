"""Exported decision logs in Parquet (``noisyloop log export --format parquet``) as streams
of label or rank batches, read with :mod:`pyarrow.dataset` (the optional ``parquet`` extra).

A log is a Parquet file, a directory of them (searched recursively, as the
export's day partitions lay them out) or a glob; its files in sorted path
order, each row a line of the export (:mod:`app.store.logrecords`).  A
*part* (:class:`Part`) is a row group of a file; a batch holds the rows of
type ``event``, keyed by their row in the log, the files' rows one after
the other (:func:`app.evaluation.sums.row_keys`: a JSON Lines export of the
same log gets the same keys): a label batch their ``features``,
``action``, ``propensity`` and ``feedback.click``, a rank batch their
``features``, ``n_candidates`` and ``slots`` (each slot's ``slot``,
``propensity`` and ``click``).  Only the needed columns are read, a batch
of at most :data:`BATCH_ROWS` rows at a time.
"""

from __future__ import annotations

import glob
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from app.evaluation.estimators import LabelLog
from app.evaluation.rankings import RankLog
from app.evaluation.sums import row_keys

#: A batch's events (a label or a rank log).
L = TypeVar("L")
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

    _require(schema, ("type", "features", "action", "propensity", "feedback"), "label events")
    columns = {name: ds.field(name) for name in ("type", "features", "action", "propensity")}
    columns["click"] = ds.field("feedback", "click")
    return columns


def _rank_columns(schema: Any) -> dict[str, Any]:
    """The projection of a rank batch (ValueError naming a missing column)."""
    import pyarrow.dataset as ds

    _require(schema, ("type", "features", "slots"), "rankings")
    return {name: ds.field(name) for name in ("type", "features", "slots", "n_candidates")
            if schema.get_field_index(name) >= 0}


def _require(schema: Any, names: tuple[str, ...], kind: str) -> None:
    missing = [c for c in names if schema.get_field_index(c) < 0]
    if missing:
        raise ValueError(f"not a log of {kind} of `noisyloop log export` (no column "
                         f"{', '.join(missing)})")


def _fragment(part: Part) -> Any:
    import pyarrow.dataset as ds

    fragment = next(iter(ds.dataset(part.file, format="parquet").get_fragments()))
    return fragment.subset(row_group_ids=[part.row_group])


def label_batches(part: Part, n_actions: int) -> Iterator[tuple[LabelLog, np.ndarray]]:
    """The label events of ``part`` in batches with their keys (ValueError for a file that
    is not a label log's export or rows it cannot evaluate)."""
    return _event_batches(part, _columns, lambda batch: _label_log(batch, n_actions))


def rank_batches(part: Part) -> Iterator[tuple[RankLog, np.ndarray]]:
    """The rankings of ``part`` in batches with their keys (ValueError for a file that is not
    a rank log's export or rows it cannot evaluate)."""
    return _event_batches(part, _rank_columns, _rank_log)


def _event_batches(part: Part, columns: Callable[[Any], dict[str, Any]],
                   convert: Callable[[Any], L]) -> Iterator[tuple[L, np.ndarray]]:
    """The events of ``part`` (rows of type ``event``, projected by ``columns`` of the
    file's schema) in batches converted by ``convert``, with their keys."""
    fragment = _fragment(part)
    first = part.first_row
    for batch in fragment.to_batches(columns=columns(fragment.physical_schema),
                                     batch_size=BATCH_ROWS):
        n = batch.num_rows
        event = np.asarray(batch.column("type").to_numpy(zero_copy_only=False) == "event")
        rows = np.flatnonzero(event)
        first += n
        if not len(rows):
            continue
        events = batch.take(rows) if len(rows) < n else batch
        try:
            log = convert(events)
        except ValueError as exc:
            raise ValueError(f"{part.file}: {exc}") from None
        yield log, row_keys(rows + (first - n))


def _features(batch: Any, needed: tuple[str, ...]) -> np.ndarray:
    """The ``n x d`` features of a batch whose columns ``needed`` have no nulls."""
    import pyarrow.compute as pc

    for name in needed:
        if batch.column(name).null_count:
            raise ValueError(f"an event without {name}")
    features = batch.column("features")
    if _is_struct(features.type):
        return _sparse_features(features)
    lengths = pc.list_value_length(features).to_numpy()
    d = int(lengths[0])
    if np.any(lengths != d):
        raise ValueError("events with features of different lengths")
    return np.asarray(features.flatten().to_numpy(), dtype=np.float64).reshape(-1, d)


def _is_struct(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_struct(kind))


def _sparse_features(features: Any) -> np.ndarray:
    """The ``n x d`` features of a column in the log's sparse form (structs of ``size``,
    ``indices``, ``values``: :mod:`app.store.logrecords`), dense for this batch only."""
    sizes = np.asarray(features.field("size").to_numpy(zero_copy_only=False))
    d = int(sizes[0])
    if np.any(sizes != d):
        raise ValueError("events with features of different lengths")
    indices, values = features.field("indices"), features.field("values")
    counts = np.asarray(indices.value_lengths().to_numpy(zero_copy_only=False))
    flat = np.asarray(indices.flatten().to_numpy(), dtype=np.int64)
    if flat.size and not (flat.min() >= 0 and flat.max() < d):
        raise ValueError(f"sparse indices outside 0..{d - 1}")
    X = np.zeros((len(sizes), d))
    X[np.repeat(np.arange(len(sizes)), counts), flat] = np.asarray(
        values.flatten().to_numpy(), dtype=np.float64)
    return X


def _label_log(batch: Any, n_actions: int) -> LabelLog:
    X = _features(batch, ("features", "action", "propensity", "click"))
    return LabelLog(X=X, actions=np.asarray(batch.column("action").to_numpy(), dtype=np.int64),
                    propensities=np.asarray(batch.column("propensity").to_numpy(),
                                            dtype=np.float64),
                    rewards=np.asarray(batch.column("click").to_numpy(), dtype=np.float64),
                    n_actions=n_actions)


def _rank_log(batch: Any) -> RankLog:
    """The rankings of a batch (ValueError when one shows no slot, not slots 0 .. m - 1 in
    order, or a slot without its propensity)."""
    X = _features(batch, ("features", "slots"))
    slots = batch.column("slots")
    shown = np.asarray(slots.value_lengths().to_numpy(), dtype=np.int64)
    if shown.min() == 0:
        raise ValueError("a ranking without a shown slot")
    flat = slots.flatten()
    n, total = len(shown), int(shown.sum())
    row = np.repeat(np.arange(n), shown)
    col = np.arange(total) - np.repeat(np.cumsum(shown) - shown, shown)
    names = {flat.type.field(i).name for i in range(flat.type.num_fields)}
    if "slot" not in names or flat.field("slot").null_count or np.any(
            flat.field("slot").to_numpy(zero_copy_only=False) != col):
        raise ValueError("a ranking whose slots are not 0, 1, ... in order")
    if "propensity" not in names or flat.field("propensity").null_count:
        raise ValueError("a slot without propensity")
    clicks = np.zeros((n, int(shown.max())))
    propensities = np.ones_like(clicks)
    propensities[row, col] = flat.field("propensity").to_numpy(zero_copy_only=False)
    if "click" in names:
        clicks[row, col] = flat.field("click").fill_null(0.0).to_numpy(zero_copy_only=False)
    candidates = (batch.column("n_candidates").fill_null(0).to_numpy(zero_copy_only=False)
                  if "n_candidates" in batch.schema.names else np.zeros(n))
    return RankLog(X=X, clicks=clicks, propensities=propensities, shown=shown,
                   candidates=np.asarray(candidates, dtype=np.int64))


def label_counts(files: list[str]) -> tuple[int, int]:
    """The log's events and its largest ``action`` or ``greedy_action`` plus one (one pass
    over those three columns: the footers' row counts hold the markers too; ValueError
    without events)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    dataset = ds.dataset(files, format="parquet")
    names = [c for c in ("action", "greedy_action") if c in dataset.schema.names]
    events, largest = 0, -1
    batches = (dataset.to_batches(columns=["type", *names], batch_size=BATCH_ROWS)
               if "type" in dataset.schema.names else ())
    for batch in batches:
        events += int(pc.sum(pc.equal(batch.column("type"), "event")).as_py() or 0)
        for name in names:
            value = pc.max(batch.column(name)).as_py()
            largest = max(largest, -1 if value is None else int(value))
    if largest < 0 or not events:
        raise ValueError("no events (is it a `noisyloop log export` file?)")
    return events, largest + 1


def identified_batches(files: list[str], n_actions: int
                       ) -> Iterator[tuple[LabelLog, list[str]]]:
    """The label events of the log in batches, oldest first, each with its events'
    ``stream_id`` ("" without one; ValueError as :func:`label_batches`)."""
    def convert(batch: Any) -> tuple[LabelLog, list[str]]:
        ids = (batch.column("stream_id").fill_null("").to_pylist()
               if "stream_id" in batch.schema.names else [""] * batch.num_rows)
        return _label_log(batch, n_actions), ids

    for part in parts(files):
        for batch, _ in _event_batches(part, _id_columns, convert):
            yield batch


def _id_columns(schema: Any) -> dict[str, Any]:
    """The projection of a label batch with its stream ids (when the file has them)."""
    import pyarrow.dataset as ds

    columns = _columns(schema)
    if schema.get_field_index("stream_id") >= 0:
        columns["stream_id"] = ds.field("stream_id")
    return columns


def first_event(files: list[str]) -> dict[str, Any]:
    """The first event row of the log ``files`` as its JSON Lines export's line (its null
    fields left out, as the line has none; empty without an event)."""
    import pyarrow.parquet as pq

    for file in files:
        for batch in pq.ParquetFile(file).iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                if row.get("type") == "event":
                    return {name: value for name, value in row.items() if value is not None}
    return {}
