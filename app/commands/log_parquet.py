"""A decision log written to Parquet as its pages arrive: bounded memory, partitioned by day,
resumable (``noisyloop log export --format parquet``).

Each page (JSON Lines) is parsed by :func:`pyarrow.json.read_json` (no
Python objects per event line) and split by the day of its lines' ``time``; a
day's rows are written to ``DIR/day=YYYY-MM-DD/part-NNNNNN.parquet`` in row
groups of at least :data:`ROW_GROUP` rows, and a file is closed (renamed
from ``.tmp``) once it holds :data:`FILE_ROWS` rows, when the day changes or
when its schema would change.  ``DIR/_position.json`` records, each time
every file is closed, the log position after the last line written (none
once the whole log is read) and the next part number: ``--resume`` deletes
parts written after it and reads on from there.  Part numbers grow with the
log, so the files' sorted paths are the log's order (as
:mod:`app.evaluation.parquetlog` reads them).

A page holding both forms of ``features`` (a list, and the sparse form of
a context the log stored sparse) is given the sparse form throughout
(:func:`one_features_form`); pages of one form are written as they come, so
a dense model's export is as before.

A marker line becomes a row of its ``type``, ``stream_id`` and ``time`` and
its other fields as one JSON text, ``detail`` (:func:`marker_rows`): a
marker's fields differ by type and may name an event's column with another
type (a ``drift`` marker's ``action`` is its policy, an event's the played
label) or be an empty object (a ``promote`` marker's ``params``), which a
Parquet column cannot hold.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: Rows buffered before they are written as a row group.
ROW_GROUP = 50_000
#: Rows of a file before the next part starts.
FILE_ROWS = 1_000_000
#: The file recording where a directory's export stopped.
POSITION = "_position.json"
#: How the service's event lines open (:mod:`app.store.logrecords`): a page whose lines all
#: do holds no marker.
EVENT_LINE = b'{"type":"event",'
#: Fields a marker's row keeps as columns; the others go into :data:`DETAIL`.
MARKER_COLUMNS = ("type", "stream_id", "time")
DETAIL = "detail"
#: A line's ``features`` in the sparse form, and as a list.
_SPARSE_FEATURES = re.compile(rb'"features":\s*\{')
_LIST_FEATURES = re.compile(rb'"features":\s*\[')


def resume_position(out: Path) -> tuple[str | None, int]:
    """``(after, next part)`` of an earlier export into ``out`` (``(None, 0)`` without one);
    parts written after the recorded position are deleted."""
    saved = out / POSITION
    if not saved.exists():
        return None, 0
    state = json.loads(saved.read_text())
    if state["after"] is None:
        raise ValueError(f"{out}: the export there read the whole log (export the newer "
                         "events elsewhere with --since)")
    for path in out.rglob("part-*"):
        if path.suffix == ".tmp" or int(path.name[5:11]) >= state["next_part"]:
            path.unlink()
    return state["after"], int(state["next_part"])


class DayWriter:
    """The open part files of an export directory (module docstring)."""

    def __init__(self, out: Path, next_part: int) -> None:
        self.out = out
        self.next_part = next_part
        self.day: str | None = None
        self.writer: Any = None
        self.path: Path | None = None
        self.rows = 0
        self.pending: list[Any] = []
        self.pending_rows = 0

    def add(self, table: Any) -> None:
        """Add a page's rows (an Arrow table of the export's lines)."""
        import pyarrow.compute as pc

        days = pc.utf8_slice_codeunits(table.column("time"), 0, 10)
        for day in days.unique().to_pylist():
            rows = table.filter(pc.equal(days, day))
            if day != self.day:
                self.close()
                self.day = day
            self.pending.append(rows)
            self.pending_rows += rows.num_rows
            if self.pending_rows >= ROW_GROUP:
                self.flush()

    def flush(self) -> None:
        """Write the buffered rows as one row group."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self.pending:
            return
        try:
            table = pa.concat_tables(self.pending, promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # pages of other types: one by one
            pending, self.pending = self.pending, []
            for rows in pending:
                self.pending = [rows]
                self.flush()
            return
        self.pending, self.pending_rows = [], 0
        if self.writer is not None and not table.schema.equals(self.writer.schema):
            self.close()
        if self.writer is None:
            folder = self.out / f"day={self.day}"
            folder.mkdir(parents=True, exist_ok=True)
            self.path = folder / f"part-{self.next_part:06d}.parquet.tmp"
            self.next_part += 1
            self.writer = pq.ParquetWriter(self.path, table.schema)
        self.writer.write_table(table)
        self.rows += table.num_rows
        if self.rows >= FILE_ROWS:
            self.close()

    def close(self) -> None:
        """Write the buffered rows and close the open file (renamed to its final name)."""
        self.flush()
        if self.writer is not None and self.path is not None:
            self.writer.close()
            self.path.rename(self.path.with_suffix(""))
        self.writer, self.path, self.rows = None, None, 0

    def save(self, after: str | None) -> None:
        """Close every file and record the position ``after`` (the log after the last line
        added)."""
        self.close()
        (self.out / POSITION).write_text(json.dumps({"after": after,
                                                     "next_part": self.next_part}))


def marker_rows(body: bytes) -> bytes:
    """The page ``body`` with each marker line as its row (module docstring); event lines
    are kept as they are."""
    lines = body.count(b"\n") + (not body.endswith(b"\n"))
    if body.startswith(EVENT_LINE) + body.count(b"\n" + EVENT_LINE) == lines:
        return body
    out = []
    for line in body.splitlines(keepends=True):
        record = None if line.startswith(EVENT_LINE) or not line.strip() else json.loads(line)
        if record is None or record.get("type") == "event":
            out.append(line)
            continue
        row = {name: record.pop(name, None) for name in MARKER_COLUMNS}
        row[DETAIL] = json.dumps(record)
        out.append(json.dumps(row).encode() + b"\n")
    return b"".join(out)


def one_features_form(body: bytes) -> bytes:
    """The page ``body`` with every event's ``features`` in the sparse form when some are
    (:mod:`app.store.logrecords`: a context stored sparse keeps that form, one stored dense
    is a list; a Parquet column holds one type); a page of one form is kept as it is."""
    if not (_SPARSE_FEATURES.search(body) and _LIST_FEATURES.search(body)):
        return body
    out = []
    for line in body.splitlines(keepends=True):
        record = json.loads(line) if line.strip() else None
        features = record.get("features") if isinstance(record, dict) else None
        if not isinstance(record, dict) or not isinstance(features, list):
            out.append(line)
            continue
        indices = [i for i, v in enumerate(features) if v != 0]
        record["features"] = {"size": len(features), "indices": indices,
                              "values": [features[i] for i in indices]}
        out.append(json.dumps(record, separators=(",", ":")).encode() + b"\n")
    return b"".join(out)


def write_pages(pages: Iterator[tuple[bytes, str | None]], out: Path, next_part: int,
                advance: Callable[[int], None]) -> int:
    """Write the pages (body and the position after it) into ``out``; returns the rows."""
    import pyarrow.json as pj

    writer = DayWriter(out, next_part)
    n = 0
    after = None
    for body, after in pages:
        if not body:
            continue
        rows = one_features_form(marker_rows(body))
        table = pj.read_json(io.BytesIO(rows), read_options=pj.ReadOptions(
            block_size=max(len(rows), 1 << 20)))
        writer.add(table)
        n += table.num_rows
        advance(table.num_rows)
        if writer.writer is None and not writer.pending:  # every file closed: a safe point
            writer.save(after)
    writer.save(after)
    return n
