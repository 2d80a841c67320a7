"""Readers of logged ranking data: Vowpal Wabbit's ADF text and the Open Bandit Dataset.

Both give features as *named* features (``{name: value}``, what the service
takes as named features), so that logs whose features are strings or hashes
keep their meaning; :class:`FeatureIndex` turns named rows into dense
matrices for the learners in process.

* :func:`read_vw_adf`: one :class:`AdfExample` per multi-line example
  (examples end at a blank line): an optional ``shared`` line with the
  context, then one line per action; the logged action's line starts with a
  label ``[action]:cost:probability`` (the action part is ignored in ADF,
  the line is the action).  Features are ``name[:value]`` (value 1 when
  absent) after a ``|namespace`` marker; a feature's name is
  ``namespace^name`` as VW's audit output spells it (``name`` alone in the
  default namespace ``|``).
* :func:`read_obd`: the Open Bandit Dataset's layout, a log CSV with columns
  ``item_id, position, click, propensity_score, user_feature_*,
  user-item_affinity_*`` (others, e.g. ``timestamp``, ignored) and
  ``item_context.csv`` with ``item_id`` and ``item_feature_*`` per item.
  One :class:`ObdRecord` per log row; positions are renumbered 0, 1, ...
  in the order of their values (the files count from 1); a numeric cell is
  a feature with that value, any other cell (the dataset's hashed
  categories) the named feature ``column=cell`` with value 1.  Slate logs
  (Open Bandit Pipeline's slate layout) add ``slate_id``, the slate a row's
  impression belongs to, and ``pscore_cascade``, the logging policy's
  probability of the slate's items down to that row's position.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

Named = dict[str, float]


@dataclass(frozen=True)
class AdfExample:
    """One ADF example: the shared context, the actions and the logged outcome (if labelled)."""

    shared: Named
    actions: list[Named]
    logged: int | None
    """Row of the labelled action in ``actions``, None when no line carries a label."""
    cost: float | None
    probability: float | None


@dataclass(frozen=True)
class ObdRecord:
    """One Open Bandit Dataset log row: the user's context and the item shown at a position."""

    context: Named
    """``user_feature_*`` and ``user-item_affinity_*`` cells as named features."""
    item_id: int
    position: int
    """0-based slot."""
    click: float
    propensity: float
    slate: str | None = None
    """``slate_id`` in slate logs."""
    pscore_cascade: float | None = None
    """``pscore_cascade`` in slate logs: ``P(items at positions 0 .. position)``."""


def _features(text: str, where: str) -> Named:
    out: Named = {}
    for group in text.split("|")[1:]:
        tokens = group.split()
        if not tokens:
            continue
        namespace = "" if group[:1].isspace() else tokens[0]
        for token in tokens[0 if not namespace else 1:]:
            name, sep, value = token.rpartition(":")
            if not sep:
                name, value = value, "1"
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"{where}: feature {token!r} has no numeric value") from None
            key = f"{namespace}^{name}" if namespace else name
            out[key] = out.get(key, 0.0) + number
    return out


def _label(text: str, where: str) -> tuple[float, float] | None:
    head = text.split("|", 1)[0].strip()
    if not head:
        return None
    parts = head.split(":")
    if len(parts) != 3:
        raise ValueError(f"{where}: label {head!r} is not [action]:cost:probability")
    try:
        cost, prob = float(parts[1]), float(parts[2])
    except ValueError:
        raise ValueError(f"{where}: label {head!r} is not [action]:cost:probability") from None
    if not 0.0 < prob <= 1.0:
        raise ValueError(f"{where}: probability {prob} outside (0, 1]")
    return cost, prob


def _adf_example(lines: list[tuple[int, str]], source: str) -> AdfExample:
    shared: Named = {}
    actions: list[Named] = []
    logged: tuple[int, float, float] | None = None
    for number, line in lines:
        where = f"{source}:{number}"
        if line.startswith("shared"):
            if actions or shared:
                raise ValueError(f"{where}: a shared line must come first, once")
            shared = _features(line[len("shared"):], where)
            continue
        label = _label(line, where)
        if label is not None:
            if logged is not None:
                raise ValueError(f"{where}: a second labelled action in one example")
            logged = (len(actions), *label)
        actions.append(_features(line, where))
    if not actions:
        raise ValueError(f"{source}:{lines[0][0]}: an example without actions")
    if logged is None:
        return AdfExample(shared, actions, None, None, None)
    return AdfExample(shared, actions, logged[0], logged[1], logged[2])


def read_vw_adf(path: str | Path) -> Iterator[AdfExample]:
    """The examples of a VW ADF text file, in order (ValueError naming the line on bad input)."""
    block: list[tuple[int, str]] = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if line:
                block.append((number, line))
            elif block:
                yield _adf_example(block, str(path))
                block = []
    if block:
        yield _adf_example(block, str(path))


def _cell(column: str, value: str) -> tuple[str, float]:
    try:
        return column, float(value)
    except ValueError:
        return f"{column}={value}", 1.0


def read_obd_items(path: str | Path) -> dict[int, Named]:
    """``item_context.csv``: item id -> its ``item_feature_*`` cells as named features."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None or "item_id" not in reader.fieldnames:
            raise ValueError(f"{path}: no item_id column")
        columns = [c for c in reader.fieldnames if c.startswith("item_feature_")]
        return {int(row["item_id"]): dict(_cell(c, row[c]) for c in columns) for row in reader}


def read_obd(path: str | Path) -> Iterator[ObdRecord]:
    """The rows of an Open Bandit Dataset log CSV (module docstring), in file order."""
    required = ("item_id", "position", "click", "propensity_score")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        names = reader.fieldnames or []
        missing = [c for c in required if c not in names]
        if missing:
            raise ValueError(f"{path}: missing columns {missing}")
        if ("slate_id" in names) != ("pscore_cascade" in names):
            raise ValueError(f"{path}: slate_id and pscore_cascade go together")
        slates = "slate_id" in names
        columns = [c for c in names
                   if c.startswith("user_feature_") or c.startswith("user-item_affinity_")]
        rows = list(reader)
    slots = {p: k for k, p in enumerate(sorted({int(r["position"]) for r in rows}))}
    for row in rows:
        yield ObdRecord(context=dict(_cell(c, row[c]) for c in columns),
                        item_id=int(row["item_id"]), position=slots[int(row["position"])],
                        click=float(row["click"]), propensity=float(row["propensity_score"]),
                        slate=row["slate_id"] if slates else None,
                        pscore_cascade=float(row["pscore_cascade"]) if slates else None)


class FeatureIndex:
    """Columns for feature names in order of first sight; :meth:`dense` rows of named features."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.columns: dict[str, int] = {}
        self.add(names)

    def add(self, names: Iterable[str]) -> None:
        """Give each new name the next column."""
        for name in names:
            self.columns.setdefault(name, len(self.columns))

    def dense(self, rows: Iterable[Named]) -> np.ndarray:
        """A ``len(rows) x len(columns)`` matrix (names without a column are dropped)."""
        rows = list(rows)
        out = np.zeros((len(rows), len(self.columns)))
        for i, row in enumerate(rows):
            for name, value in row.items():
                j = self.columns.get(name)
                if j is not None:
                    out[i, j] = value
        return out
