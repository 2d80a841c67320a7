"""The service's decision log (``noisyloop log export``, JSON Lines) as an evaluation log,
and the policy of a model snapshot (``GET /v1/models/{id}/snapshot`` saved to a file).

A *label* log (lines with ``action`` and ``propensity``) becomes one event per
line: context ``features``, the played ``action``, its ``propensity`` and the
reward ``feedback.click``.  A *rank* log (lines with ``slots``) becomes one
event per shown slot, as an Open Bandit Dataset log is read: the context's
``features`` plus the slot one-hot, the candidate (its ``id_hash``) as the
action among every candidate the log shows, its placement ``propensity``
and its ``click``.  Marker lines are skipped; so are lines of any other task.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.evaluation.estimators import LabelLog
from app.learners.base import Learner
from app.learners.build import build_learner


@dataclass(frozen=True)
class ServiceLog:
    """An exported decision log ready for the estimators."""

    log: LabelLog
    ranked: bool
    """A rank log: one event per shown slot."""
    items: list[int]
    """Rank logs: the candidates' id hashes in action order (label logs: empty)."""
    positions: np.ndarray | None
    """Rank logs: each event's slot."""
    stream_ids: tuple[str, ...] = ()
    """Label logs: each event's ``stream_id`` (its id on the model's event stream)."""


def read_lines(path: str | Path) -> list[dict[str, Any]]:
    """The lines of an exported log (ValueError naming a line that is not JSON)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                out.append(json.loads(raw))
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc})") from None
    return out


def read_service_log(path: str | Path, n_actions: int | None = None) -> ServiceLog:
    """The log of an exported file (see :func:`service_log`)."""
    return service_log(read_lines(path), n_actions, str(path))


def service_log(records: list[Any], n_actions: int | None = None,
                path: str = "the log") -> ServiceLog:
    """A label or rank log (module docstring) of the log's records; ``n_actions`` (a label
    log's number of labels, e.g. the model's ``n_classes``) defaults to the largest label
    seen plus one."""
    lines = [r for r in records if isinstance(r, dict) and r.get("type") == "event"]
    if not lines:
        raise ValueError(f"{path}: no events (is it a `noisyloop log export` file?)")
    if all("slots" in line for line in lines):
        return _rank_log(path, lines)
    if not all("action" in line and "propensity" in line for line in lines):
        raise ValueError(f"{path}: only label logs (action, propensity) and rank logs (slots) "
                         "can be evaluated")
    try:
        X = np.array([line["features"] for line in lines], dtype=float)
        actions = np.array([line["action"] for line in lines], dtype=np.int64)
        rewards = np.array([line["feedback"]["click"] for line in lines], dtype=float)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: a label line without features, action or feedback.click "
                         f"({exc!r})") from None
    seen = max(int(actions.max()), *(int(line.get("greedy_action", 0)) for line in lines)) + 1
    log = LabelLog(X=X, actions=actions,
                   propensities=np.array([line["propensity"] for line in lines], dtype=float),
                   rewards=rewards, n_actions=seen if n_actions is None else n_actions)
    return ServiceLog(log, False, [], None,
                      tuple(str(line.get("stream_id", "")) for line in lines))


def _rank_log(path: str, lines: list[dict[str, Any]]) -> ServiceLog:
    rows = [(line["features"], slot) for line in lines for slot in line["slots"]]
    if not rows:
        raise ValueError(f"{path}: no shown slot")
    items = sorted({int(slot["id_hash"]) for _, slot in rows})
    column = {item: k for k, item in enumerate(items)}
    positions = np.array([slot["slot"] for _, slot in rows], dtype=np.int64)
    X = np.hstack([np.array([features for features, _ in rows], dtype=float),
                   np.eye(int(positions.max()) + 1)[positions]])
    log = LabelLog(X=X, actions=np.array([column[int(slot["id_hash"])] for _, slot in rows]),
                   propensities=np.array([slot["propensity"] for _, slot in rows], dtype=float),
                   rewards=np.array([slot.get("click", 0.0) for _, slot in rows], dtype=float),
                   n_actions=len(items))
    return ServiceLog(log, True, items, positions)


def snapshot_learner(path: str | Path) -> tuple[Learner, dict[str, Any]]:
    """The learner of a saved ``GET /v1/models/{id}/snapshot`` response and its model config
    (ValueError when the file is not one)."""
    try:
        snapshot = json.loads(Path(path).read_text(encoding="utf-8"))
        config = dict(snapshot["model"])
        state = {name: np.load(io.BytesIO(base64.b64decode(array["data_b64"])),
                               allow_pickle=False)
                 for name, array in snapshot["state"].items()}
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise ValueError(f"{path}: not a saved model snapshot ({exc!r})") from None
    return build_learner(config, state), config
