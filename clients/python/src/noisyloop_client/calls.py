"""What each API operation sends: method, path, query, body, which token, expected status.

The sync and async clients differ only in how they send a :class:`Call`, so
every path, body and default of the contract (``api.md``) is written once,
here.  Bodies are encoded by :mod:`noisyloop_client.codec` (numpy arrays and
scalars allowed).
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from noisyloop_client import codec
from noisyloop_client.errors import NoisyloopError
from noisyloop_client.types import Features

#: Statuses worth retrying: the store is unavailable (the contract's 503).
RETRY_STATUSES = frozenset({503})


@dataclass(frozen=True)
class Call:
    """One HTTP request of the API and the status that means success."""

    method: str
    path: str
    ok: int = 200
    body: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    admin: bool = False
    paged: bool = False
    """The answer is a page of JSON Lines: :func:`parse` returns it as a :class:`Page`."""

    def content(self) -> bytes | None:
        """The JSON body as bytes (numpy arrays and scalars allowed)."""
        if self.body is None:
            return None
        return codec.dumps(self.body)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter for 503 answers and connection errors.

    Attempt ``n`` (0-based) waits ``min(max_delay, base * 2**n)`` times a
    uniform factor in ``[0.5, 1]``, or the server's ``Retry-After`` when it
    is larger (still capped by ``max_delay``).  4xx answers are never retried.
    """

    retries: int = 3
    base: float = 0.1
    max_delay: float = 5.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        wait = min(self.max_delay, self.base * 2.0 ** attempt) * random.uniform(0.5, 1.0)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_delay))
        return wait


def _seg(value: str) -> str:
    return quote(value, safe="")


def _model(model_id: str, suffix: str = "") -> str:
    return f"/v1/models/{_seg(model_id)}{suffix}"


def parse(status: int, content: bytes, headers: Any, call: Call) -> Any:
    """Decoded answer of a successful call; raise :class:`NoisyloopError` otherwise."""
    if status == call.ok and call.paged:
        return Page(content, headers.get(NEXT_AFTER_HEADER))
    if status == call.ok or (call.ok == 202 and status == 200 and call.params.get("wait")):
        return codec.loads(content) if content else None
    try:
        body: Any = codec.loads(content) if content else None
    except codec.DecodeError:
        body = content.decode("utf-8", errors="replace")
    raise NoisyloopError.from_body(status, body, retry_after_of(headers))


def retry_after_of(headers: Any) -> float | None:
    """``Retry-After`` in seconds (numeric form only), else None."""
    value = headers.get("retry-after") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


# --- admin -----------------------------------------------------------------

def create_tenant(tenant_id: str) -> Call:
    return Call("POST", "/v1/admin/tenants", 201, {"tenant_id": tenant_id}, admin=True)


def list_tenants() -> Call:
    return Call("GET", "/v1/admin/tenants", admin=True)


def delete_tenant(tenant_id: str) -> Call:
    return Call("DELETE", f"/v1/admin/tenants/{_seg(tenant_id)}", 204, admin=True)


def create_key(tenant_id: str) -> Call:
    return Call("POST", f"/v1/admin/tenants/{_seg(tenant_id)}/keys", 201, admin=True)


def revoke_key(tenant_id: str, key_id: str) -> Call:
    return Call("DELETE", f"/v1/admin/tenants/{_seg(tenant_id)}/keys/{_seg(key_id)}", 204,
                admin=True)


def list_tenant_models(tenant_id: str) -> Call:
    return Call("GET", f"/v1/admin/tenants/{_seg(tenant_id)}/models", admin=True)


# --- models ----------------------------------------------------------------

def create_model(model_id: str, task: str | None = None, n_features: int | None = None, *,
                 preset: str | None = None, algorithm: str | None = None,
                 n_classes: int | None = None, params: dict[str, Any] | None = None,
                 feedback: dict[str, Any] | None = None, seed: int | None = None,
                 n_action_features: int | None = None, slots: int | None = None,
                 versions: dict[str, Any] | None = None,
                 mode: str | None = None, drift: dict[str, Any] | None = None,
                 label_budget: dict[str, Any] | None = None,
                 max_feature_norm: float | None = None) -> Call:
    body: dict[str, Any] = {"model_id": model_id}
    for name, value in (("task", task), ("n_features", n_features), ("preset", preset),
                        ("algorithm", algorithm), ("n_classes", n_classes), ("params", params),
                        ("feedback", feedback), ("seed", seed),
                        ("n_action_features", n_action_features), ("slots", slots),
                        ("versions", versions), ("mode", mode), ("drift", drift),
                        ("label_budget", label_budget),
                        ("max_feature_norm", max_feature_norm)):
        if value is not None:
            body[name] = value
    return Call("POST", "/v1/models", 201, body)


def list_models() -> Call:
    return Call("GET", "/v1/models")


def get_model(model_id: str) -> Call:
    return Call("GET", _model(model_id))


def delete_model(model_id: str) -> Call:
    return Call("DELETE", _model(model_id), 204)


def reset_model(model_id: str) -> Call:
    return Call("POST", _model(model_id, "/reset"))


def get_snapshot(model_id: str) -> Call:
    return Call("GET", _model(model_id, "/snapshot"))


def put_snapshot(model_id: str, snapshot: dict[str, Any]) -> Call:
    return Call("PUT", _model(model_id, "/snapshot"), 200, snapshot)


def versions(model_id: str, limit: int | None = None, before: int | None = None) -> Call:
    params = {name: value for name, value in (("limit", limit), ("before", before))
              if value is not None}
    return Call("GET", _model(model_id, "/versions"), 200, None, params)


def rollback(model_id: str, version: int) -> Call:
    return Call("POST", _model(model_id, "/rollback"), 200, {"version": version})


def series(model_id: str, limit: int | None = None, before: float | None = None) -> Call:
    params = {name: value for name, value in (("limit", limit), ("before", before))
              if value is not None}
    return Call("GET", _model(model_id, "/series"), 200, None, params)


def evaluate(model_id: str, policy: str | dict[str, Any], since: str | None = None,
             rho0: float | None = None, rho1: float | None = None,
             bootstrap: int | None = None, train_fraction: float | None = None,
             until: str | None = None) -> Call:
    body = {"policy": policy, **{k: v for k, v in (("since", since), ("until", until),
                                                     ("rho0", rho0), ("rho1", rho1),
                                                     ("bootstrap", bootstrap),
                                                     ("train_fraction", train_fraction))
                                  if v is not None}}
    return Call("POST", _model(model_id, "/evaluations"), 202, body)


def evaluation(model_id: str, job_id: str) -> Call:
    return Call("GET", _model(model_id, f"/evaluations/{_seg(job_id)}"))


def set_drift(model_id: str, action: str) -> Call:
    """What a detected drift does from the trainer's next batch: ``none``, ``alert`` or
    ``recover``."""
    return Call("PUT", _model(model_id, "/drift"), 200, {"action": action})


def label_budget(model_id: str) -> Call:
    return Call("GET", _model(model_id, "/label-budget"))


def sync(model_id: str, timeout: float | None = None) -> Call:
    params = {} if timeout is None else {"timeout": timeout}
    return Call("POST", _model(model_id, "/sync"), 200, None, params)


# --- decision log ------------------------------------------------------------

#: Lines asked for per page of the decision log (the service's largest page).
LOG_PAGE = 10_000
#: Response header with the ``after`` of the log's next page (absent on the last page).
NEXT_AFTER_HEADER = "X-Next-After"


@dataclass(frozen=True)
class Page:
    """A page of JSON Lines as served and the ``after`` of the next page (None: the last)."""

    body: bytes
    next_after: str | None


@dataclass
class LogPages:
    """Where a read of a model's decision log is: the call of its next page, until the log
    (or ``limit`` lines, None: all) is read.  ``order``: ``asc`` oldest first, ``desc``
    newest first; ``since``/``until``: ISO 8601 or Unix seconds."""

    model_id: str
    since: str | None = None
    until: str | None = None
    order: str = "asc"
    limit: int | None = None
    after: str | None = None
    lines: int = 0
    done: bool = False

    def next_call(self) -> Call | None:
        """The request of the next page, or None when the read is over."""
        wanted = LOG_PAGE if self.limit is None else min(LOG_PAGE, self.limit - self.lines)
        if self.done or wanted <= 0:
            return None
        params = {name: value for name, value in (
            ("since", self.since), ("until", self.until), ("after", self.after))
            if value is not None}
        return Call("GET", _model(self.model_id, "/log"), 200, None,
                    {**params, "order": self.order, "limit": wanted}, paged=True)

    def read(self, page: Page) -> bytes:
        """Take ``page`` (the answer to :meth:`next_call`); returns its body."""
        self.lines += page.body.count(b"\n")
        self.after = page.next_after
        self.done = page.next_after is None
        return page.body


def log_records(body: bytes) -> list[dict[str, Any]]:
    """The records of a page of JSON Lines."""
    return [codec.loads(line) for line in body.splitlines()]


# --- challengers ------------------------------------------------------------

def challengers(model_id: str) -> Call:
    return Call("GET", _model(model_id, "/challengers"))


def add_challenger(model_id: str, name: str, algorithm: str,
                   params: dict[str, Any] | None = None) -> Call:
    return Call("POST", _model(model_id, "/challengers"), 201,
                {"name": name, "algorithm": algorithm, "params": params or {}})


def delete_challenger(model_id: str, name: str) -> Call:
    return Call("DELETE", _model(model_id, f"/challengers/{_seg(name)}"), 204)


def promote(model_id: str, challenger: str, previous_as: str | None = "previous") -> Call:
    return Call("POST", _model(model_id, "/promote"), 200,
                {"challenger": challenger, "previous_as": previous_as})


# --- dead letters ----------------------------------------------------------

def list_dead_letters(model_id: str, limit: int | None = None, after: str | None = None
                      ) -> Call:
    params: dict[str, Any] = {name: value for name, value in (("limit", limit),
                                                              ("after", after))
                              if value is not None}
    return Call("GET", _model(model_id, "/dead-letters"), 200, None, params)


def drop_dead_letter(model_id: str, entry_id: str) -> Call:
    return Call("DELETE", _model(model_id, f"/dead-letters/{_seg(entry_id)}"), 204)


def drop_dead_letters(model_id: str) -> Call:
    return Call("DELETE", _model(model_id, "/dead-letters"))


def retry_dead_letter(model_id: str, entry_id: str) -> Call:
    return Call("POST", _model(model_id, f"/dead-letters/{_seg(entry_id)}/retry"), 202)


# --- predict and feedback --------------------------------------------------

def _decision_options(body: dict[str, Any], explore: bool, defer: bool,
                      baseline: Any) -> dict[str, Any]:
    """``body`` with the decision options that differ from their defaults: ``explore``,
    ``defer`` (activate the decision later) and ``baseline`` (apprentice mode)."""
    if not explore:
        body["explore"] = False
    if defer:
        body["defer"] = True
    if baseline is not None:
        body["baseline"] = baseline
    return body


def predict_body(features: Features, explore: bool = True, defer: bool = False,
                 baseline: float | None = None) -> dict[str, Any]:
    return _decision_options({"features": features}, explore, defer, baseline)


def predict_batch_body(instances: Any, explore: bool = True, defer: bool = False,
                       baseline: list[float] | None = None) -> dict[str, Any]:
    return _decision_options({"instances": instances}, explore, defer, baseline)


def predict(model_id: str, features: Features, explore: bool = True, defer: bool = False,
            baseline: float | None = None) -> Call:
    return Call("POST", _model(model_id, "/predict"), 200,
                predict_body(features, explore, defer, baseline))


def predict_batch(model_id: str, instances: Any, explore: bool = True, defer: bool = False,
                  baseline: list[float] | None = None) -> Call:
    return Call("POST", _model(model_id, "/predict"), 200,
                predict_batch_body(instances, explore, defer, baseline))


def rank_body(features: Features, actions: list[dict[str, Any]], slots: int | None = None,
              explore: bool = True, defer: bool = False,
              baseline: list[str] | None = None) -> dict[str, Any]:
    """One rank request: the context and the candidates ``[{"id", "features"}, ...]``."""
    body: dict[str, Any] = {"features": features, "actions": actions}
    if slots is not None:
        body["slots"] = slots
    return _decision_options(body, explore, defer, baseline)


def rank(model_id: str, features: Features, actions: list[dict[str, Any]],
         slots: int | None = None, explore: bool = True, defer: bool = False,
         baseline: list[str] | None = None) -> Call:
    return Call("POST", _model(model_id, "/rank"), 200,
                rank_body(features, actions, slots, explore, defer, baseline))


def activate(model_id: str, event_id: str) -> Call:
    """Activate a decision made with ``defer``: it then awaits feedback as any other."""
    return Call("POST", _model(model_id, f"/events/{_seg(event_id)}/activate"))


def set_mode(model_id: str, mode: str) -> Call:
    """Serve ``"online"``, as an ``"apprentice"`` (the requests' baselines) or
    ``"logging"`` (the baselines, learning nothing) from now on."""
    return Call("PUT", _model(model_id, "/mode"), 200, {"mode": mode})


def rank_batch(model_id: str, requests: list[dict[str, Any]]) -> Call:
    """Many rank requests (each a :func:`rank_body`)."""
    return Call("POST", _model(model_id, "/rank"), 200, {"requests": requests})


def feedback_event(event_id: str | None, fields: dict[str, Any]) -> dict[str, Any]:
    """One feedback event: ``event_id`` plus the task's fields (``click``, ``label``, ...)."""
    return fields if event_id is None else {"event_id": event_id, **fields}


def feedback(model_id: str, event_id: str | None, fields: dict[str, Any]) -> Call:
    return Call("POST", _model(model_id, "/feedback"), 202, feedback_event(event_id, fields))


def feedback_batch(model_id: str, events: list[dict[str, Any]]) -> Call:
    return Call("POST", _model(model_id, "/feedback"), 202, {"events": events})


# --- noise and confusion ---------------------------------------------------

def get_noise(model_id: str) -> Call:
    return Call("GET", _model(model_id, "/noise"))


class Unset(enum.Enum):
    """The type of :data:`UNSET`."""

    UNSET = "unset"


#: "Not given": the field is left out of the body (unchanged), where ``None`` sends
#: ``null``, which means something of its own (the default back).
UNSET = Unset.UNSET


def put_noise(model_id: str, rho0: float | None = None, rho1: float | None = None,
              estimator: str | None = None, one_right_label: bool | Unset | None = UNSET,
              max_width: float | None = None, half_life: float | Unset | None = UNSET) -> Call:
    """Set the rates (both), the estimator, whether every input has exactly one right
    label (the anchor estimate's assumption; ``None``: the algorithm's setting), the widest
    interval still published, the anchor's half-life (``None``: the default, every play
    alike); what is not given stays."""
    body: dict[str, Any] = {"rho0": rho0, "rho1": rho1, "estimator": estimator,
                            "max_width": max_width}
    body = {k: v for k, v in body.items() if v is not None}
    for name, value in (("one_right_label", one_right_label), ("half_life", half_life)):
        if value is not UNSET:
            body[name] = value
    return Call("PUT", _model(model_id, "/noise"), 200, body)


def estimate_noise(model_id: str, wait: bool = False, timeout: float | None = None) -> Call:
    params: dict[str, Any] = {"wait": "true"} if wait else {}
    if timeout is not None:
        params["timeout"] = timeout
    return Call("POST", _model(model_id, "/noise/estimate"), 202, None, params)


def get_confusion(model_id: str) -> Call:
    return Call("GET", _model(model_id, "/confusion"))


def put_confusion(model_id: str, matrix: Any) -> Call:
    return Call("PUT", _model(model_id, "/confusion"), 200, {"matrix": matrix})


# --- operations ------------------------------------------------------------

def health() -> Call:
    return Call("GET", "/healthz")


def ready() -> Call:
    return Call("GET", "/readyz")
