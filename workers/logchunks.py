"""A chunk of a model's decision-log entries as batches of its log shape, made dense a span of
lines at a time (what every pass of a queued evaluation reads, :mod:`workers.evaluations`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.evaluation.servicelog import record_width
from app.evaluation.shapes import LogShape
from app.evaluation.streaming import Batch
from app.features import row_spans
from app.learners.config import ModelConfig
from app.store.decisionlog import LogEntry, LoggedEvent
from app.store.logrecords import entry_records


def line_events(entries: list[LogEntry]) -> list[LoggedEvent | None]:
    """The logged event of each line of ``entries`` in order (None: a marker's line)."""
    out: list[LoggedEvent | None] = []
    for entry in entries:
        out += [None] if entry.is_marker else entry.events()
    return out


def spans(entries: list[LogEntry], first_line: int, shape: LogShape, config: ModelConfig,
          max_cells: int) -> tuple[Iterator[tuple[range, Batch]], int]:
    """The events of ``entries`` as batches of ``shape``, each with the lines of ``entries``
    it was made of and keyed from its line of the window (the first line of ``entries`` its
    line ``first_line``), made when it is reached (none when the entries hold only markers),
    and the lines they hold.

    A batch is made dense while it is used: its rows and their stack, at most ``max_cells``
    float64 together (the worker's ``max_dense_cells``; the log's lines keep a context
    stored sparse sparse).
    """
    records: list[dict[str, Any]] = [r for entry in entries for r in entry_records(entry)]

    def batches() -> Iterator[tuple[range, Batch]]:
        for rows in row_spans(len(records), 2 * record_width(records), max_cells):
            batch = shape.batch(records[rows.start:rows.stop], first_line + rows.start,
                                config, "the decision log")
            if batch is not None:
                yield rows, batch

    return batches(), len(records)


def shape_batches(entries: list[LogEntry], first_line: int, shape: LogShape,
                  config: ModelConfig, max_cells: int) -> tuple[Iterator[Batch], int]:
    """:func:`spans` without the lines of each batch."""
    made, lines = spans(entries, first_line, shape, config, max_cells)
    return (batch for _, batch in made), lines
