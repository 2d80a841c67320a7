"""Reader of Decision Service JSON (dsjson): the log Azure Personalizer exported and Vowpal
Wabbit reads with ``--dsjson``.

One JSON object per line.  A single-slot (CB) line holds the context ``c`` with the actions'
feature objects in ``c._multi``, the logged action's row ``_labelIndex`` (0-based; else
``_label_Action`` - 1), its ``_label_cost`` and ``_label_probability``, and optionally
``a``/``p`` (the ranking served and its probabilities), ``EventId``, ``Timestamp``,
``pdrop`` and ``_skipLearn``.  A multi-slot (CCB) line adds ``c._slots`` (each slot's
features, ``_id`` and optionally ``_inc``, the actions it may take) and ``_outcomes``, one
per slot: ``_label_cost``, ``_a`` (the actions served in the slot, the chosen one first,
as rows of ``_multi``) and ``_p`` (their probabilities).  Each slot of a CCB line is one
decision of its own over the actions ``_multi`` holds, its context the line's context with
the slot's features (how Vowpal Wabbit's ``--ccb_explore_adf`` learns a slot: a CB ADF
example over the actions with the slot's features shared).

Cost is Vowpal Wabbit's convention, a negative reward: Personalizer logged a reward ``r``
as ``_label_cost = -r``; the readers of this module keep the cost, and their callers take
``-cost`` as the reward.

Features are named as VW's audit output spells them (:mod:`app.sim.logs`): a feature of the
top level of ``c`` has its own name, one inside an object (or a list of objects) the
namespace ``key^name`` of the innermost object's key; a string value is the feature
``name + value`` with value 1 (VW's convention), a number its value, ``true`` 1 (``false``
and ``null``: none), a list of numbers the features ``key^0``, ``key^1``...  Keys that start
with ``_`` are metadata, never features.  The raw objects are kept too
(:attr:`DsjsonDecision.context`, :attr:`DsjsonDecision.action_objects`) for readers that
name features their own way.

Lines skipped, and counted in :class:`DsjsonCounts`: ``_skipLearn: true`` (VW does not
learn them either), lines without a decision (reward or observation lines without ``c``,
or with no action), decisions (or slots) without a label, and Decision Service's
bracketed marker lines (``[CHECKPOINT INFO LINE]``, in VW's own test data).  ``pdrop`` is
the probability that the logging system dropped an event like this one (VW weights a kept
event by ``1 / (1 - pdrop)``); a log whose events all share one ``pdrop`` gives every event
the same weight, which changes no mean, so the readers accept it; differing ``pdrop`` values
are refused (the estimators here weigh every event alike), as is ``pdrop`` 1 (as in VW).
A malformed line raises :class:`DsjsonError` naming the line and field, or with
``skip_bad`` is counted in ``bad_lines`` and skipped.

A continuous-action (CATS) log, what Vowpal Wabbit's ``--cats`` reads with ``--dsjson``
(its ``cats_train.json`` test data), labels a line with ``_label_ca``: ``{"action": a,
"cost": c, "pdf_value": p}``, the action played, its cost and its density under the
logging policy, the context in ``c`` (VW's ``--json`` form puts the features at the top
level instead).  :func:`read_cats` reads one (:class:`CatsDecision`; a line without
``_label_ca`` is counted ``unlabelled``, as a decision without a label);
:func:`is_cats_log` tells such a log from a CB/CCB one by its first JSON line.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from app.sim.logs import AdfExample, Named

T = TypeVar("T")

#: A Decision Service marker line (``[CHECKPOINT INFO LINE]``): bracketed text, no JSON.
MARKER = re.compile(r"\[[^\[\]{}]*\]")


class DsjsonError(ValueError):
    """A malformed dsjson line: ``path:line: field: what is wrong``."""


@dataclass
class DsjsonCounts:
    """What a read skipped (module docstring), by reason."""

    decisions: int = 0
    """Decisions read (a CCB line gives one per labelled slot)."""
    skipped_learn: int = 0
    no_decision: int = 0
    unlabelled: int = 0
    markers: int = 0
    bad_lines: int = 0
    first_bad: str | None = None
    """The message of the first bad line skipped."""
    pdrop: float | None = None
    """The log's ``pdrop`` (None when no line has one)."""

    def bad(self, exc: Exception) -> None:
        """Count a bad line skipped (``exc`` says why)."""
        self.bad_lines += 1
        self.first_bad = self.first_bad or str(exc)

    def to_dict(self) -> dict[str, Any]:
        """The counts as JSON."""
        return {"decisions": self.decisions, "skipped_learn": self.skipped_learn,
                "no_decision": self.no_decision, "unlabelled": self.unlabelled,
                "markers": self.markers, "bad_lines": self.bad_lines,
                "first_bad": self.first_bad, "pdrop": self.pdrop}


@dataclass(frozen=True)
class DsjsonDecision:
    """One logged decision: a CB line, or one slot of a CCB line."""

    line: int
    """1-based line of the file."""
    example: AdfExample
    """Shared features (a slot's included), every action of ``_multi``, the logged row, its
    cost and probability."""
    context: Mapping[str, Any]
    """``c`` without its ``_`` keys, plus a slot's feature objects for a CCB slot."""
    action_objects: list[Mapping[str, Any]]
    """The objects of ``c._multi``."""
    candidates: list[int]
    """Rows of ``_multi`` the decision chose among (a CCB slot: its ``_inc``, else the
    actions no earlier slot of the line took; a CB line: those ``p`` gives a probability
    above 0, all without ``a`` and ``p``)."""
    slot: int | None = None
    """The slot's index in a CCB line; None for a CB line."""
    event_id: str | None = None
    timestamp: str | None = None


@dataclass(frozen=True)
class CatsDecision:
    """One logged decision of a continuous-action (CATS) log (module docstring)."""

    line: int
    """1-based line of the file."""
    features: Named
    """The context's named features (``c``, or the line's top level without one)."""
    action: float
    pdf: float
    """The action's density under the logging policy (``pdf_value``)."""
    cost: float
    event_id: str | None = None


#: Top-level keys of a dsjson line that are metadata, not features (a CATS line without
#: ``c`` holds its features at the top level, VW's ``--json`` form).
METADATA = ("Version", "EventId", "Timestamp", "VWState", "pdrop", "a", "p", "o")


@dataclass
class _Line:
    number: int
    where: str
    obj: dict[str, Any] = field(default_factory=dict)

    def fail(self, name: str, message: str) -> DsjsonError:
        return DsjsonError(f"{self.where}:{self.number}: {name}: {message}")

    def number_of(self, value: Any, name: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise self.fail(name, f"{value!r:.40} is not a finite number")
        return float(value)

    def probability(self, value: Any, name: str) -> float:
        p = self.number_of(value, name)
        if not 0.0 < p <= 1.0:
            raise self.fail(name, f"probability {p} outside (0, 1]")
        return p

    def row(self, value: Any, name: str, n_actions: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) \
                or not 0 <= value < n_actions:
            raise self.fail(name, f"{value!r:.40} is not a row of the {n_actions} actions "
                                  "of c._multi")
        return value


def features(obj: Mapping[str, Any], namespace: str = "") -> Named:
    """The named features of a dsjson feature object (module docstring).

    >>> features({"user": {"tier": "gold", "age": 31, "new": True}, "hour": 9, "_tag": "x"})
    {'user^tiergold': 1.0, 'user^age': 31.0, 'user^new': 1.0, 'hour': 9.0}
    """
    out: Named = {}

    def add(name: str, value: float) -> None:
        key = f"{namespace}^{name}" if namespace else name
        out[key] = out.get(key, 0.0) + value

    for key, value in obj.items():
        if key.startswith("_") or value is None or value is False:
            continue
        if value is True:
            add(key, 1.0)
        elif isinstance(value, int | float):
            add(key, float(value))
        elif isinstance(value, str):
            add(key + value, 1.0)
        elif isinstance(value, dict):
            _merge(out, features(value, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    _merge(out, features(item, key))
                elif isinstance(item, str):
                    _merge(out, {f"{key}^{item}": 1.0})
                elif isinstance(item, int | float) and not isinstance(item, bool):
                    _merge(out, {f"{key}^{i}": float(item)})
    return out


def _merge(out: Named, more: Named) -> None:
    for name, value in more.items():
        out[name] = out.get(name, 0.0) + value


def _finite(named: Named, line: _Line, name: str) -> Named:
    bad = next((k for k, v in named.items() if not math.isfinite(v)), None)
    if bad is not None:
        raise line.fail(name, f"feature {bad!r} is not finite")
    return named


def _public(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if not k.startswith("_")}


def _cb(line: _Line, context: Mapping[str, Any], actions: list[Mapping[str, Any]],
        named: list[Named], counts: DsjsonCounts) -> Iterator[DsjsonDecision]:
    obj = line.obj
    if "_labelIndex" in obj:
        logged = line.row(obj["_labelIndex"], "_labelIndex", len(actions))
    elif "_label_Action" in obj:
        logged = line.row(obj["_label_Action"], "_label_Action", len(actions) + 1) - 1
        if logged < 0:
            raise line.fail("_label_Action", "actions count from 1")
    else:
        counts.unlabelled += 1
        return
    cost = line.number_of(obj.get("_label_cost"), "_label_cost")
    probability = line.probability(obj.get("_label_probability"), "_label_probability")
    shared = _finite(features(context), line, "c")
    candidates = _offered(obj.get("a"), obj.get("p"), len(actions))
    if logged not in candidates:
        raise line.fail("p", f"the logged action {logged + 1} has probability 0 in p")
    yield DsjsonDecision(line.number, AdfExample(shared, named, logged, cost, probability),
                         context, actions, candidates, None,
                         _text(obj.get("EventId", obj.get("event_id"))),
                         _text(obj.get("Timestamp")))


def _offered(ranking: Any, probabilities: Any, n_actions: int) -> list[int]:
    """The rows of ``_multi`` a CB line could choose: those ``a`` (1-based ids, the served
    ranking) gives a probability above 0 in ``p`` (Personalizer's excluded actions have 0);
    every row when ``a`` and ``p`` do not describe every action."""
    every = list(range(n_actions))
    if not (isinstance(ranking, list) and isinstance(probabilities, list)
            and len(ranking) == len(probabilities) == n_actions
            and sorted(i for i in ranking if type(i) is int) == [i + 1 for i in every]
            and all(isinstance(q, int | float) and not isinstance(q, bool)
                    for q in probabilities)):
        return every
    return sorted(i - 1 for i, q in zip(ranking, probabilities, strict=True) if q > 0)


def _ccb(line: _Line, context: Mapping[str, Any], actions: list[Mapping[str, Any]],
         named: list[Named], counts: DsjsonCounts) -> Iterator[DsjsonDecision]:
    obj, c = line.obj, line.obj["c"]
    slots, outcomes = c["_slots"], obj.get("_outcomes", [])
    if not isinstance(slots, list) or not all(isinstance(s, dict) for s in slots):
        raise line.fail("c._slots", "is not a list of objects")
    if not isinstance(outcomes, list) or not all(isinstance(o, dict) for o in outcomes):
        raise line.fail("_outcomes", "is not a list of objects")
    if len(outcomes) > len(slots):
        raise line.fail("_outcomes", f"{len(outcomes)} outcomes for {len(slots)} slots")
    taken: set[int] = set()
    found: list[DsjsonDecision] = []
    for k, slot in enumerate(slots):
        inc = slot.get("_inc")
        if inc is None:
            candidates = [j for j in range(len(actions)) if j not in taken]
        elif isinstance(inc, list) and inc:
            candidates = [line.row(j, f"c._slots[{k}]._inc", len(actions)) for j in inc]
        else:
            raise line.fail(f"c._slots[{k}]._inc", "is not a non-empty list of rows")
        outcome = outcomes[k] if k < len(outcomes) else {}
        if "_label_cost" not in outcome:
            counts.unlabelled += 1
            continue
        name = f"_outcomes[{k}]"
        served, probs = outcome.get("_a"), outcome.get("_p")
        if not isinstance(served, list) or not served:
            raise line.fail(f"{name}._a", "is not a non-empty list of rows")
        if not isinstance(probs, list) or not probs:
            raise line.fail(f"{name}._p", "is not a non-empty list of probabilities")
        logged = line.row(served[0], f"{name}._a[0]", len(actions))
        if logged not in candidates:
            raise line.fail(f"{name}._a[0]", f"action {logged} is not among the slot's "
                                             f"candidates {candidates}")
        taken.add(logged)
        cost = line.number_of(outcome["_label_cost"], f"{name}._label_cost")
        probability = line.probability(probs[0], f"{name}._p[0]")
        slot_context = {**context, **_public(slot)}
        shared = _finite(features(slot_context), line, f"c._slots[{k}]")
        found.append(DsjsonDecision(
            line.number, AdfExample(shared, named, logged, cost, probability), slot_context,
            actions, candidates, k, _text(obj.get("EventId")), _text(obj.get("Timestamp"))))
    yield from found


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _pdrop(line: _Line, counts: DsjsonCounts) -> None:
    """Check the line's ``pdrop`` against the log's (module docstring) and keep it."""
    if "pdrop" not in line.obj:
        return
    pdrop = line.number_of(line.obj["pdrop"], "pdrop")
    if not 0.0 <= pdrop < 1.0:
        raise line.fail("pdrop", f"{pdrop} outside [0, 1): an event dropped with "
                                 "probability 1 cannot have been logged (VW refuses it too)")
    if counts.pdrop is not None and pdrop != counts.pdrop:
        raise line.fail("pdrop", f"{pdrop} differs from the log's earlier {counts.pdrop}: "
                                 "events of different pdrop need weights, which the "
                                 "estimators here do not take")
    counts.pdrop = pdrop


def _cats(line: _Line, counts: DsjsonCounts) -> Iterator[CatsDecision]:
    """The decision of one CATS line (module docstring), or none."""
    obj = line.obj
    label = obj.get("_label_ca")
    if label is None:
        counts.unlabelled += 1
        return
    if not isinstance(label, dict):
        raise line.fail("_label_ca", "is not an object")
    action, pdf, cost = (line.number_of(label.get(name), f"_label_ca.{name}")
                         for name in ("action", "pdf_value", "cost"))
    if pdf <= 0.0:
        raise line.fail("_label_ca.pdf_value", f"density {pdf} is not above 0")
    _pdrop(line, counts)
    c = obj.get("c", {k: v for k, v in obj.items() if k not in METADATA})
    if not isinstance(c, dict):
        raise line.fail("c", "is not an object")
    yield CatsDecision(line.number, _finite(features(c), line, "c"), action, pdf, cost,
                       _text(obj.get("EventId")))


def _decisions(line: _Line, counts: DsjsonCounts) -> Iterator[DsjsonDecision]:
    obj = line.obj
    c = obj.get("c")
    if c is None:
        counts.no_decision += 1
        return
    if not isinstance(c, dict):
        raise line.fail("c", "is not an object")
    actions = c.get("_multi", [])
    if not isinstance(actions, list) or not all(isinstance(a, dict) for a in actions):
        raise line.fail("c._multi", "is not a list of objects")
    if not actions:
        counts.no_decision += 1
        return
    _pdrop(line, counts)
    named = [_finite(features(a), line, f"c._multi[{i}]") for i, a in enumerate(actions)]
    context = _public(c)
    read = _ccb if "_slots" in c else _cb
    yield from read(line, context, actions, named, counts)


def read_dsjson(path: str | Path, counts: DsjsonCounts | None = None,
                skip_bad: bool = False) -> Iterator[DsjsonDecision]:
    """The decisions of a dsjson file, in order (module docstring); ``counts`` (when given)
    counts what was skipped.  A malformed line raises :class:`DsjsonError` naming its line
    and field, or is counted and skipped with ``skip_bad``."""
    return _read(path, _decisions, DsjsonCounts() if counts is None else counts, skip_bad)


def read_cats(path: str | Path, counts: DsjsonCounts | None = None,
              skip_bad: bool = False) -> Iterator[CatsDecision]:
    """The decisions of a continuous-action (CATS) dsjson file, in order, as
    :func:`read_dsjson` reads a CB/CCB one."""
    return _read(path, _cats, DsjsonCounts() if counts is None else counts, skip_bad)


def _objects(path: str | Path) -> Iterator[tuple[int, str, Any]]:
    """``(line number, text, parsed JSON or None)`` of each non-blank line (None: not JSON,
    or nested too deeply to parse)."""
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            text = raw.strip()
            if not text:
                continue
            try:
                obj = json.loads(text)
            except (ValueError, RecursionError):
                obj = None
            yield number, text, obj


def is_cats_log(path: str | Path) -> bool:
    """Whether the first JSON object line of the file is labelled ``_label_ca``."""
    return next((isinstance(obj, dict) and "_label_ca" in obj
                 for _, _, obj in _objects(path) if isinstance(obj, dict)), False)


def _read(path: str | Path, parse: Callable[[_Line, DsjsonCounts], Iterator[T]],
          counts: DsjsonCounts, skip_bad: bool) -> Iterator[T]:
    """The decisions ``parse`` finds in each line of the file (the readers' loop)."""
    for number, text, obj in _objects(path):
        line = _Line(number, str(path))
        try:
            if obj is None:
                if MARKER.fullmatch(text):
                    counts.markers += 1
                    continue
                try:
                    json.loads(text)
                except ValueError as exc:
                    raise line.fail("line", f"not JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise line.fail("line", "is not a JSON object")
            if obj.get("_skipLearn") is True:
                counts.skipped_learn += 1
                continue
            line.obj = obj
            found = list(parse(line, counts))
        except RecursionError:
            deep = line.fail("line", "nested too deeply")
            if not skip_bad:
                raise deep from None
            counts.bad(deep)
            continue
        except DsjsonError as exc:
            if not skip_bad:
                raise
            counts.bad(exc)
            continue
        counts.decisions += len(found)
        yield from found
