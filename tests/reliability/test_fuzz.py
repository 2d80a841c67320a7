"""Property-based fuzzing of the whole HTTP API from its own OpenAPI schema (schemathesis).

Every operation of ``/openapi.json`` gets schema-valid and schema-invalid
requests (hypothesis, derandomised), authenticated with a tenant key or the
admin token (and sometimes with the wrong credential or none), aimed at
random model ids and at real models of every served task.  Properties:

- no 5xx, and every 4xx carries the one error shape;
- no request hangs (each answers within :data:`MAX_SECONDS`);
- every response conforms to the document (status code, content type,
  headers, body schema);
- a schema-invalid request is refused (schemathesis' ``negative_data_rejection``);
- a schema-valid request is not refused for its shape: a 422 to one names a
  constraint the document cannot state (:data:`MODEL_DEPENDENT`, listed in
  docs/reliability.md);
- the ``frozen`` model, which only ever receives feedback for event ids
  that were never issued, is unchanged (state, version, counters, noise).

``NOISYLOOP_FUZZ_EXAMPLES`` scales the run (``make fuzz-long``).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.main import create_app
from app.settings import Settings
from app.tasks import TASKS
from tests.reliability.conftest import (
    ADMIN,
    ADMIN_TOKEN,
    FUZZ_EXAMPLES,
    setup_model,
    setup_tenant,
    task_body,
)

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

#: Longest acceptable answer of one fuzzed request (query timeouts are capped).
MAX_SECONDS = 5.0
#: ``?timeout=`` of the routes that wait by design (sync, noise estimate), capped.
WAIT_SECONDS = 0.05
#: Writes to a model that leave it as it is for what the frozen model receives: serving
#: and feedback (only for event ids never issued), computations and the dead letters it
#: does not hold.  Every other POST, PUT, PATCH or DELETE on a model is an administrative
#: change (reset, snapshot, noise, rollback, promote, mode, challengers, activation, ...)
#: and is never aimed at the frozen model (see :func:`changes_model`), so a new one is
#: classified without editing this file.
LEAVES_MODEL = {("POST", "/v1/models/{model_id}/" + tail) for tail in (
    "predict", "rank", "feedback", "sync", "noise/estimate", "evaluations",
    "dead-letters/{entry_id}/retry")} | {
    ("DELETE", "/v1/models/{model_id}/dead-letters"),
    ("DELETE", "/v1/models/{model_id}/dead-letters/{entry_id}")}
FROZEN = "frozen"
#: Error codes a schema-valid request may still get: each names a constraint that depends
#: on the model (its task, algorithm, sizes) or spans fields, which JSON schema cannot state
#: (docs/reliability.md lists them).
MODEL_DEPENDENT = {
    "invalid_features",    # feature count and sparse indices vs the model's n_features
    "invalid_feedback",    # labels vs n_classes, click vs label per algorithm, target per loss
    "invalid_param",       # algorithm vs task, params per algorithm, n_classes per task,
                           # label_budget per task, rho0 + rho1 < 1, state size limit
    "invalid_confusion",   # n_classes x n_classes, columns sum to 1, well conditioned
    "invalid_snapshot",    # base64 of .npy bytes whose shape matches the declared one
    "snapshot_mismatch",   # the arrays and shapes of the model's algorithm and sizes
    "estimate_failed",     # the estimator's run could not be made (e.g. no NREst samples)
    "estimate_unavailable",  # an estimate of a fixed estimator or hand-configured rates
    "noise_rates_unused",  # PUT .../noise rates on an algorithm that ignores them
    "estimator_unavailable",  # the nrest estimator on a model that keeps no NREst samples
    "one_right_label_unused",  # one_right_label where the estimate does not rest on it
    "wrong_task",          # rank on a model whose task is not rank
    "invalid_actions",     # action ids distinct within a rank request
    "evaluation_unsupported",  # the service evaluates label and rank models' logs only
}
#: Messages of ``invalid_request`` a schema-valid request may get: constraints across fields.
CROSS_FIELD = ("indices and values must have the same length", "duplicate indices",
               "give both rho0 and rho1",
               "give rho0 and rho1, estimator, max_width, half_life or one_right_label",
               "train_fraction goes with a configuration policy")
#: Operations whose body shape depends on the model: a feedback event has the shape of the
#: model's task (the document lists every task's), so any 422 may name that.
TASK_SHAPED = {("POST", "/v1/models/{model_id}/feedback")}
#: Statuses a schema-valid request may get without being refused for its shape.
NOT_REFUSED = {401, 404, 409, 426, 504}


@pytest.fixture
def app(redis_url: str) -> Iterator[FastAPI]:
    """The API without background roles, its lifespan run by schemathesis' ASGI client."""
    application = create_app(Settings(redis_url=redis_url, admin_token=ADMIN_TOKEN))
    yield application
    asgi.shutdown_lifespans()


def task_models(session: Any, auth: dict[str, str]) -> list[str]:
    """One model per served task (default algorithm) plus the frozen label model."""
    setup_model(session, auth, FROZEN)
    ids = []
    for task in TASKS:
        ids.append(setup_model(session, auth, f"t-{task}", **task_body(task))["model_id"])
    return ids


def model_state(session: Any, auth: dict[str, str], model_id: str) -> dict[str, Any]:
    """Everything a rejected request must not change (the counts of decisions served, and of
    those awaiting feedback, may move)."""
    model = session.request("GET", f"/v1/models/{model_id}", headers=auth).json()
    snap = session.request("GET", f"/v1/models/{model_id}/snapshot", headers=auth).json()
    stats = {k: v for k, v in model["stats"].items()
             if k not in ("predictions", "awaiting_feedback")}
    return {"version": model["version"], "stats": stats, "noise": model["noise"],
            "state": snap["state"]}


def credentials(path: str, kind: str, tenant_auth: dict[str, str]) -> dict[str, str]:
    admin_route = path.startswith("/v1/admin") or path == "/metrics"
    if kind == "right":
        return ADMIN if admin_route else tenant_auth
    if kind == "swapped":
        return tenant_auth if admin_route else ADMIN
    return {}


def waits_long(timeout: Any) -> bool:
    """Whether a ``?timeout=`` value is absent or a valid, longer wait than WAIT_SECONDS."""
    if timeout is None:
        return True
    try:
        return float(timeout) > WAIT_SECONDS
    except (TypeError, ValueError):
        return False


def per_event_answer(case: schemathesis.Case, response: Any) -> bool:
    """Whether ``response`` is a feedback batch's 202, which accepts or rejects each event on
    its own: a batch with invalid events is answered so (documented exception), each of its
    events counted once."""
    if response.status_code != 202 or not isinstance(case.body, dict) or \
            not isinstance(case.body.get("events"), list):
        return False
    doc = response.json()
    assert doc["accepted"] + len(doc["rejected"]) == len(case.body["events"]), doc
    return True


def check_response(case: schemathesis.Case, response: Any, elapsed: float, kind: str) -> None:
    label = f"{case.method} {case.formatted_path} {case.body!r:.300}"
    waited = response.status_code == 504 and \
        response.json()["error"]["code"] in ("sync_timeout", "estimate_timeout")
    assert response.status_code < 500 or waited, (label, response.status_code, response.text[:500])
    assert elapsed < MAX_SECONDS, (label, elapsed)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == {"code", "message", "field"}, (label, error)
    if kind != "right" and case.path not in ("/healthz", "/readyz",
                                             "/v1/models/{model_id}/stream"):
        assert response.status_code == 401, (label, response.status_code, response.text)
    checks = [status_code_conformance, content_type_conformance, response_headers_conformance,
              response_schema_conformance]
    if not per_event_answer(case, response):
        checks.append(negative_data_rejection)
    case.validate_response(response, checks=checks)
    if case.meta is not None and case.meta.generation.mode.is_positive and kind == "right" \
            and response.status_code >= 400 and response.status_code not in NOT_REFUSED:
        error = response.json()["error"]
        assert (case.method.upper(), case.path) in TASK_SHAPED or \
            error["code"] in MODEL_DEPENDENT or (
            error["code"] == "invalid_request"
            and any(m in error["message"] for m in CROSS_FIELD)), (
            "schema-valid request refused", label, response.status_code, error)


def changes_model(method: str, path: str) -> bool:
    """Whether a successful ``method path`` may change a model: an unsafe method (RFC 9110)
    on a model's path, unless it is one of :data:`LEAVES_MODEL`."""
    return path.startswith("/v1/models/{model_id}") and method.upper() != "GET" and \
        (method.upper(), path) not in LEAVES_MODEL


def fuzz_operation(session: Any, operation: schemathesis.APIOperation,
                   tenant_auth: dict[str, str], model_ids: list[str],
                   statuses: Counter[str]) -> None:
    """``FUZZ_EXAMPLES`` generated requests per generation mode against one operation."""
    targets: list[dict[str, Any] | None] = [None]
    if "model_id" in operation.path:
        allowed = model_ids if changes_model(operation.method, operation.path) \
            else [FROZEN, *model_ids]
        targets += [{"model_id": m} for m in allowed]
    strategies = [operation.as_strategy(generation_mode=mode, path_parameters=target)
                  for mode in schemathesis.GenerationMode for target in targets]

    @settings(max_examples=FUZZ_EXAMPLES * 2, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), print_blob=True)
    @given(case=st.one_of(strategies),
           kind=st.sampled_from(["right", "right", "right", "right", "swapped", "none"]))
    def run(case: schemathesis.Case, kind: str) -> None:
        if case.path.endswith(("/sync", "/noise/estimate")):
            # these wait up to ?timeout= by design: keep the run short (invalid values stay)
            query = case.query if isinstance(case.query, dict) else {}
            if waits_long(query.get("timeout")):
                case.query = {**query, "timeout": WAIT_SECONDS}
        start = time.monotonic()
        response = case.call(session=session, headers=credentials(case.path, kind, tenant_auth),
                             timeout=MAX_SECONDS * 2)
        elapsed = time.monotonic() - start
        statuses[f"{case.method} {case.path} {response.status_code}"] += 1
        check_response(case, response, elapsed, kind)
        if response.status_code == 204 and case.method == "DELETE" and \
                case.path == "/v1/models/{model_id}":
            deleted = case.path_parameters["model_id"] if case.path_parameters else None
            if deleted in model_ids:  # keep the real targets alive for later examples
                setup_model(session, tenant_auth, deleted,
                            **task_body(deleted.removeprefix("t-")))

    run()


def test_fuzz_every_operation_no_5xx_no_hang_no_change(app: FastAPI) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    statuses: Counter[str] = Counter()
    started = time.monotonic()
    with asgi.get_client(app) as session:
        auth = setup_tenant(session)
        model_ids = task_models(session, auth)
        for i in range(3):  # real, still open decisions on the frozen model
            r = session.request("POST", f"/v1/models/{FROZEN}/predict",
                                json={"features": [1.0, 0, 0, float(i)]}, headers=auth)
            assert r.status_code == 200, r.text
        before = model_state(session, auth, FROZEN)
        operations = [result.ok() for result in schema.get_all_operations()]
        documented = {(method.upper(), path) for path, item in app.openapi()["paths"].items()
                      for method in item}
        assert {(op.method.upper(), op.path) for op in operations} == documented
        assert documented >= LEAVES_MODEL, LEAVES_MODEL - documented
        for operation in operations:
            fuzz_operation(session, operation, auth, model_ids, statuses)
        after = model_state(session, auth, FROZEN)
    assert after == before
    total = sum(statuses.values())
    elapsed = time.monotonic() - started
    by_status: Counter[str] = Counter()
    for key, n in statuses.items():
        by_status[key.rsplit(" ", 1)[1]] += n
    summary = {"operations": len(operations), "requests": total, "seconds": round(elapsed, 1),
               "by_status": dict(sorted(by_status.items()))}
    print("fuzz:", json.dumps(summary))
    report = os.environ.get("NOISYLOOP_FUZZ_REPORT")
    if report:
        with open(report, "w", encoding="utf-8") as fh:
            json.dump({**summary, "statuses": dict(sorted(statuses.items()))}, fh, indent=1)
    assert total >= len(operations) * FUZZ_EXAMPLES
