"""The service's decision log (``noisyloop log export``, JSON Lines) as an evaluation log,
and the policy of a model snapshot (``GET /v1/models/{id}/snapshot`` saved to a file).

A *label* log (lines with ``action`` and ``propensity``) becomes one event per
line: context ``features``, the played ``action``, its ``propensity`` and the
reward ``feedback.click``.  A *rank* log (lines with ``slots``) becomes one
ranking per line (:class:`app.evaluation.rankings.RankLog`): the context
``features``, ``n_candidates`` and per shown slot its placement
``propensity`` and ``click``.  Marker lines are skipped.  :func:`label_log_of`
and :func:`rank_log_of` each read a log of their shape, refusing a line of
another (a model's log shape, :mod:`app.evaluation.shapes`, reads its batches
with them; ``noisyloop evaluate`` finds an export's shape through the task
registry, :func:`app.tasks.log_shape_of`).
Each event is keyed by its line's position in the log (markers count), as a
Parquet export's rows are; :func:`log_batches` reads a log's lines as such
logs, a batch of lines at a time.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import io
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from app.evaluation.estimators import LabelLog
from app.evaluation.rankings import RankLog
from app.evaluation.sums import row_keys
from app.learners.base import Learner
from app.learners.build import build_learner
from app.learners.config import ModelConfig


@dataclass(frozen=True)
class ServiceLog:
    """An exported decision log ready for the estimators."""

    log: LabelLog | None
    """A label log (None for a rank log)."""
    ranking: RankLog | None = None
    """A rank log (None for a label log)."""
    stream_ids: tuple[str, ...] = ()
    """Label logs: each event's ``stream_id`` (its id on the model's event stream)."""
    keys: np.ndarray | None = None
    """Each event's key, its line's position in the log (markers count;
    :func:`app.evaluation.sums.row_keys`), as a Parquet export's rows are keyed."""

    @property
    def ranked(self) -> bool:
        return self.ranking is not None

    def ranking_log(self) -> RankLog:
        """The rank log (ValueError for a label log)."""
        if self.ranking is None:
            raise ValueError("a label log is evaluated per label, not per ranking")
        return self.ranking

    def label_log(self) -> LabelLog:
        """The label log (ValueError for a rank log)."""
        if self.log is None:
            raise ValueError("a rank log is evaluated per ranking, not per label")
        return self.log


def read_lines(path: str | Path) -> Iterator[dict[str, Any]]:
    """The lines of an exported log, one at a time (ValueError naming a line that is not
    JSON)."""
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                yield json.loads(raw)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc})") from None


def read_label_log(path: str | Path, n_actions: int | None = None) -> ServiceLog:
    """The label log of an exported JSON Lines file in memory (:func:`label_log_of`)."""
    return label_log_of(read_lines(path), n_actions, str(path))


#: Lines of a JSON Lines log read at a time by :func:`rank_batches` (as Python objects:
#: about 8 KB each for a 5-slot ranking).
BATCH_LINES = 10_000
#: A label event's numbers: features, action, propensity, click, greedy action, stream id,
#: line (0-based, markers count).
_LabelRow = tuple[np.ndarray, int, float, float, int, str, int]
#: A ranking's: features, candidates (0: not logged), per shown slot (slot, propensity,
#: click), line.
_RankRow = tuple[np.ndarray, int, list[tuple[int, float, float]], int]
#: A row of either.
R = TypeVar("R", _LabelRow, _RankRow)


def dense_vector(value: Any) -> np.ndarray:
    """A line's vector as a float array, from a JSON list or the sparse form of a vector
    the log stored sparse, ``{"size": n, "indices": [...], "values": [...]}``
    (:mod:`app.store.logrecords`); ValueError for an index out of range, KeyError or
    TypeError for neither form.

    >>> dense_vector({"size": 4, "indices": [1, 3], "values": [0.5, 2.0]}).tolist()
    [0.0, 0.5, 0.0, 2.0]
    """
    if not isinstance(value, dict):
        return np.asarray(value, dtype=float)
    out = np.zeros(int(value["size"]))
    indices = np.asarray(value["indices"], dtype=np.int64)
    if indices.size and not (indices.min() >= 0 and indices.max() < out.size):
        raise ValueError(f"sparse indices outside 0..{out.size - 1}")
    out[indices] = np.asarray(value["values"], dtype=float)
    return out


def record_width(records: Iterable[dict[str, Any]]) -> int:
    """The context width of the first event line of ``records`` (a list's length, or the
    sparse form's ``size``): the floats one of its events takes dense; 1 without one.

    >>> record_width([{"type": "marker"}, {"type": "event", "features": {"size": 9}}])
    9
    """
    for record in records:
        if record.get("type") == "event":
            features = record.get("features")
            return max(1, int(features["size"]) if isinstance(features, dict)
                       else len(features or ()))
    return 1


def label_log_of(records: Iterable[Any], n_actions: int | None = None,
                 path: str = "the log") -> ServiceLog:
    """The label log (module docstring) of the log's records; ``n_actions`` (its number of
    labels, e.g. the model's ``n_classes``) defaults to the largest label seen plus one
    (ValueError naming a line that is not a label event).  One pass keeping only each
    event's numbers, not the records."""
    label = _rows(records, path, _label_row)
    actions = np.array([row[1] for row in label], dtype=np.int64)
    seen = max(int(actions.max()), max(row[4] for row in label)) + 1
    log = LabelLog(X=_stack([row[0] for row in label], path), actions=actions,
                   propensities=np.array([row[2] for row in label], dtype=float),
                   rewards=np.array([row[3] for row in label], dtype=float),
                   n_actions=seen if n_actions is None else n_actions)
    return ServiceLog(log, None, tuple(row[5] for row in label),
                      row_keys(np.array([row[6] for row in label], dtype=np.int64)))


def rank_log_of(records: Iterable[Any], path: str = "the log") -> ServiceLog:
    """The rank log (module docstring) of the log's records (ValueError naming a line that
    is not a ranking).  One pass keeping only each ranking's numbers (200,000 records of
    5-slot rankings take about 1.5 GB as Python objects)."""
    rankings = _rows(records, path, _rank_row)
    return ServiceLog(None, _rank_log(path, rankings),
                      keys=row_keys(np.array([row[3] for row in rankings], dtype=np.int64)))


def keyed_batch(records: list[Any], first_line: int,
                read: Callable[[list[Any]], ServiceLog]) -> ServiceLog | None:
    """The log ``read`` makes of ``records``, consecutive lines of a log from its line
    ``first_line``, keyed by their lines in the log; None when they hold no event."""
    if not any(_is_event(r) for r in records):
        return None
    log = read(records)
    assert log.keys is not None
    return dataclasses.replace(log, keys=log.keys + np.uint64(first_line))


def log_batches(lines: Iterable[Any], size: int, read: Callable[[list[Any]], ServiceLog]
                ) -> Iterator[ServiceLog]:
    """The logs ``read`` makes of consecutive batches of ``size`` lines (:func:`keyed_batch`;
    ``read``: :func:`label_log_of` or :func:`rank_log_of` with its arguments)."""
    first = 0
    it = iter(lines)
    while chunk := list(itertools.islice(it, size)):
        log = keyed_batch(chunk, first, read)
        first += len(chunk)
        if log is not None:
            yield log


def rank_batches(path: str | Path, size: int = BATCH_LINES
                 ) -> Iterator[tuple[RankLog, np.ndarray]]:
    """The rankings of the JSON Lines rank log at ``path`` with their keys, read ``size``
    lines at a time."""
    for read in log_batches(read_lines(path), size, functools.partial(rank_log_of,
                                                                       path=str(path))):
        assert read.keys is not None  # keyed_batch keys every event
        yield read.ranking_log(), read.keys


def label_counts(path: str | Path) -> tuple[int, int]:
    """The events of the JSON Lines log at ``path`` and its largest ``action`` or
    ``greedy_action`` plus one, as :func:`label_log_of` counts them (a pass parsing every
    line, keeping two numbers; ValueError without events)."""
    events, largest = 0, -1
    for line in read_lines(path):
        if isinstance(line, dict) and line.get("type") == "event":
            events += 1
            for value in (line.get("action"), line.get("greedy_action", 0)):
                if isinstance(value, int | float):
                    largest = max(largest, int(value))
    if not events:
        raise ValueError(f"{path}: no events (is it a `noisyloop log export` file?)")
    return events, largest + 1


def identified_batches(path: str | Path, n_actions: int, size: int = BATCH_LINES
                       ) -> Iterator[tuple[LabelLog, tuple[str, ...]]]:
    """The label events of the JSON Lines log at ``path`` with their ``stream_id``, read
    ``size`` lines at a time."""
    for read in log_batches(read_lines(path), size, functools.partial(
            label_log_of, n_actions=n_actions, path=str(path))):
        yield read.label_log(), read.stream_ids


def first_event(path: str | Path) -> dict[str, Any]:
    """The first event line of the JSON Lines log at ``path`` (empty without one)."""
    return next((line for line in read_lines(path) if _is_event(line)), {})


def _is_event(record: Any) -> bool:
    return isinstance(record, dict) and record.get("type") == "event"


def _label_row(line: dict[str, Any], features: np.ndarray, position: int
               ) -> _LabelRow | None:
    """A label event's numbers; None for a line without ``action`` and ``propensity``."""
    if "action" not in line or "propensity" not in line:
        return None
    return (features, int(line["action"]), float(line["propensity"]),
            float(line["feedback"]["click"]), int(line.get("greedy_action", 0)),
            str(line.get("stream_id", "")), position)


def _rank_row(line: dict[str, Any], features: np.ndarray, position: int) -> _RankRow | None:
    """A ranking's numbers; None for a line without ``slots``."""
    if "slots" not in line:
        return None
    return (features, int(line.get("n_candidates") or 0),
            [(int(slot["slot"]), float(slot["propensity"]), float(slot.get("click", 0.0)))
             for slot in line["slots"]], position)


def _rows(records: Iterable[Any], path: str,
          row: Callable[[dict[str, Any], np.ndarray, int], R | None]) -> list[R]:
    """The rows ``row`` makes of the event lines (ValueError for a log without events,
    naming a malformed line, or a line ``row`` does not read)."""
    rows: list[R] = []
    events = 0
    for position, line in enumerate(records):
        if not _is_event(line):
            continue
        events += 1
        try:
            found = row(line, dense_vector(line["features"]), position)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: a line without features, action or feedback.click, "
                             f"or a slot without slot or propensity ({exc!r})") from None
        if found is None:
            raise ValueError(f"{path}: only label logs (action, propensity) and rank logs "
                             "(slots) can be evaluated, each alone")
        rows.append(found)
    if not events:
        raise ValueError(f"{path}: no events (is it a `noisyloop log export` file?)")
    return rows


def _stack(features: list[np.ndarray], path: str) -> np.ndarray:
    try:
        return np.stack(features)
    except ValueError:
        raise ValueError(f"{path}: lines with features of different lengths") from None


def _rank_log(path: str, rows: list[_RankRow]) -> RankLog:
    """The rankings of the rank rows (ValueError when one shows no slot, or not slots
    0 .. m - 1 in order)."""
    shown = np.array([len(slots) for _, _, slots, _ in rows], dtype=np.int64)
    if shown.min() == 0:
        raise ValueError(f"{path}: a ranking without a shown slot")
    clicks = np.zeros((len(rows), int(shown.max())))
    propensities = np.ones_like(clicks)
    for i, (_, _, slots, _) in enumerate(rows):
        if [k for k, _, _ in slots] != list(range(len(slots))):
            raise ValueError(f"{path}: a ranking whose slots are not 0, 1, ... in order")
        propensities[i, :len(slots)] = [p for _, p, _ in slots]
        clicks[i, :len(slots)] = [c for _, _, c in slots]
    return RankLog(X=_stack([row[0] for row in rows], path), clicks=clicks,
                   propensities=propensities, shown=shown,
                   candidates=np.array([row[1] for row in rows], dtype=np.int64))


def snapshot_learner(path: str | Path) -> tuple[Learner, ModelConfig]:
    """The learner of a saved ``GET /v1/models/{id}/snapshot`` response and its model config
    (ValueError when the file is not one)."""
    try:
        snapshot = json.loads(Path(path).read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise ValueError(f"{path}: not a saved model snapshot ({exc!r})") from None
    try:
        return learner_of_snapshot(snapshot)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def learner_of_snapshot(snapshot: Any) -> tuple[Learner, ModelConfig]:
    """The learner of a ``GET /v1/models/{id}/snapshot`` response (parsed JSON) and its model
    config (ValueError when it is not one)."""
    try:
        # a snapshot written by hand may name no model
        config = ModelConfig.of({"model_id": "", **snapshot["model"]})
        state = {name: np.load(io.BytesIO(base64.b64decode(array["data_b64"])),
                               allow_pickle=False)
                 for name, array in snapshot["state"].items()}
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise ValueError(f"not a saved model snapshot ({exc!r})") from None
    return build_learner(config, state), config
