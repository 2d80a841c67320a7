"""Request bodies parsed by hand for the fast path (:mod:`app.server.fastpath`): a single
dense predict, and plain dense ranks.

A predict body is simple when it is exactly ``{"features": [numbers]}`` with
an optional boolean ``"explore"`` (numbers as pydantic's strict
``FiniteFloat`` takes them: JSON integers and floats, not booleans; no
integer literal long enough for orjson and ``json`` to disagree, see
:mod:`app.api.routing`).

A rank body is plain when it is one request ``{"features": [numbers], "actions":
[{"id": "...", "features": [numbers]}, ...], "slots"?: int, "explore"?: bool,
"defer"?: bool}`` or ``{"requests": [such requests]}``, with types and
bounds exactly as the request schema (:mod:`app.api.schemas.rank`) takes
them: numbers are JSON integers and floats (not booleans), ids strings of 1
to 256 characters, 1 to 1,000 candidates per request, slots a JSON integer
of at least 1, no other field, nested no deeper than the app allows (4
levels, 6 for a batch).  Anything else (sparse or named features,
``baseline``, a ``null``, ``"slots": 2.0``) is None: the regular route
parses, validates and answers it, errors included.  The types are checked
over all the objects, ids and numbers of a batch at once (sets of types,
built in C), which costs a fraction of validating them one by one.

Both give the :class:`~app.api.decisionrequest.DecisionRequest` the schemas
give for the same body (``tests/api/test_fastbody_property.py`` checks it);
what the model must check (widths, norms, options against the model) is
checked after, on either path alike (:mod:`app.api.deciding`).

An integer literal beyond 64 bits, which orjson reads as a float and
``json`` as an integer, needs no look at the raw bytes here (unlike a
predict): as a number it is the same float either way, and where only an
integer will do (``slots``) the float is not plain.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import orjson

from app.api.decisionrequest import Candidates, DecisionOptions, DecisionRequest
from app.api.routing import may_hold_big_int
from app.api.schemas.rank import MAX_CANDIDATES
from app.fields import MAX_DENSE
from app.settings import MAX_BATCH
from app.tasks.rank import MAX_ACTION_ID_CHARS

_NUMBER_TYPES = frozenset((int, float))
_OPTIONS = {"slots": int, "explore": bool, "defer": bool}
_FIELDS = frozenset(("features", "actions", *_OPTIONS))
#: Byte strings whose presence near the start sends a body to the regular route without
#: parsing it here (sparse or named features, an apprentice's baseline; also when only an id
#: holds them): only a saving, so only the start is searched (a whole batch costs 1 ms).
_NOT_PLAIN = (b'"indices"', b'"named"', b'"baseline"')
_PEEK = 2048
#: The "features" key of a single predict comes within this many bytes of the body's start
#: (a body with more white space than that before it just takes the regular route).
_FEATURES_WITHIN = 64
#: Nesting of a plain body: ``{"actions": [{"features": [`` (a batch: two levels more).
_DEPTH = 4
_EXPLORE, _GREEDY = DecisionOptions(explore=True), DecisionOptions(explore=False)


def json_object(body: bytes) -> dict[str, Any] | None:
    """The JSON object ``body`` holds; None for invalid JSON or any other value (the fast
    path's hand parsers then leave the body to the regular route).

    >>> json_object(b'{"a": 1}'), json_object(b'[1]'), json_object(b'{"a": ')
    ({'a': 1}, None, None)
    """
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return doc if type(doc) is dict else None


def single_predict_body(body: bytes) -> DecisionRequest | None:
    """The request of a body that is exactly ``{"features": [numbers], "explore"?: bool}``.

    None for any other body (the regular route then parses, validates and
    answers it, errors included).

    >>> single_predict_body(b'{"features": [1, 2.5], "explore": false}').contexts
    [[1, 2.5]]
    >>> [single_predict_body(b) for b in (b'{"features": [true]}', b'{"features": [1], "x": 1}',
    ...                                   b'{"instances": [[1]]}', b'[1]', b'{"features": [1')]
    [None, None, None, None, None]
    """
    if b'"features"' not in body[:_FEATURES_WITHIN] or may_hold_big_int(body):
        return None  # a batch (1 MB of instances) is not parsed here only to be refused
    doc = json_object(body)
    if doc is None:
        return None
    features = doc.get("features")
    explore = doc.get("explore", True)
    if (type(features) is not list or type(explore) is not bool
            or len(doc) != 1 + ("explore" in doc) or len(features) > MAX_DENSE
            or not _NUMBER_TYPES.issuperset(map(type, features))):
        return None
    return DecisionRequest([features], None, [_EXPLORE if explore else _GREEDY], False)


def plain_rank_body(body: bytes, max_depth: int) -> DecisionRequest | None:
    """The requests of a plain body nested at most ``max_depth`` levels, else None.

    >>> plain = plain_rank_body(b'{"features": [1], "actions": [{"id": "a", '
    ...                         b'"features": [2.5, 0]}], "explore": false}', 32)
    >>> plain.contexts, plain.candidates, plain.options[0].explore, plain.batch
    ([[1]], [Candidates(ids=['a'], features=[[2.5, 0]], per_slot=None)], False, False)
    >>> [plain_rank_body(b, 32) for b in (
    ...     b'{"features": [1], "actions": [{"id": "a", "features": [true]}]}',
    ...     b'{"features": [1], "actions": [{"id": "", "features": [1]}]}',
    ...     b'{"features": [1], "actions": [{"id": "a", "features": [1]}], "slots": 1.0}',
    ...     b'{"requests": []}', b'[1]', b'{"features": [1')]
    [None, None, None, None, None, None]
    """
    start = body[:_PEEK]
    if any(marker in start for marker in _NOT_PLAIN):
        return None
    doc = json_object(body)
    if doc is None:
        return None
    batch = "requests" in doc
    requests = doc["requests"] if batch else [doc]
    if max_depth < _DEPTH + 2 * batch or (batch and (
            len(doc) != 1 or type(requests) is not list or not 1 <= len(requests) <= MAX_BATCH)):
        return None
    checked = [_options(r) for r in requests]
    options = [o for o in checked if o is not None]
    if len(options) < len(checked):
        return None
    actions = [r["actions"] for r in requests]
    if ({*map(type, actions)} != {list}
            or not 1 <= min(map(len, actions)) <= max(map(len, actions)) <= MAX_CANDIDATES):
        return None
    every = list(chain.from_iterable(actions))
    if {*map(type, every)} != {dict} or {*map(len, every)} != {2}:
        return None
    try:
        ids = [a["id"] for a in every]
        rows = [a["features"] for a in every]
    except KeyError:
        return None
    contexts: list[Any] = [r["features"] for r in requests]
    if ({*map(type, ids)} != {str} or min(map(len, ids)) < 1
            or max(map(len, ids)) > MAX_ACTION_ID_CHARS
            or {*map(type, contexts)} != {list} or {*map(type, rows)} != {list}
            or max(map(len, chain(contexts, rows))) > MAX_DENSE
            or not _NUMBER_TYPES.issuperset(map(type, chain.from_iterable(contexts)))
            or not _NUMBER_TYPES.issuperset(map(type, chain.from_iterable(rows)))):
        return None
    candidates: list[Candidates] = []
    end = 0
    for n in map(len, actions):
        candidates.append(Candidates(ids[end:end + n], rows[end:end + n]))
        end += n
    return DecisionRequest(contexts, candidates, options, batch)


def _options(doc: Any) -> DecisionOptions | None:
    """The options of one request of a plain body (its fields checked), else None."""
    if (type(doc) is not dict or not _FIELDS.issuperset(doc) or "actions" not in doc
            or "features" not in doc):
        return None
    found = {name: doc[name] for name in _OPTIONS if name in doc}
    if any(type(value) is not _OPTIONS[name] for name, value in found.items()):
        return None
    if found.get("slots", 1) < 1:
        return None
    return DecisionOptions(**found)
