"""The Python client keeps up with the API: every operation of the service's OpenAPI schema
is reached by a method of :class:`Client` (and of :class:`AsyncClient`, which has the same
methods), unless it is on :data:`ABSENT` with the reason."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from noisyloop_client import AsyncClient, Client

from app.main import create_app
from app.settings import Settings

#: Operations the client leaves out on purpose, and why.
ABSENT = {
    ("GET", "/v1/models/{model_id}/stream"):
        "the WebSocket endpoint's description (a plain GET gets 426): Stream and AsyncStream "
        "open the WebSocket",
    ("GET", "/metrics"): "Prometheus text for a scraper, not an application call",
}

#: A value for a required parameter, by its annotation.
_DUMMY: dict[str, Any] = {"str": "x", "int": 1, "float": 1.0, "bool": False,
                          "Features": [0.0], "Any": [[0.0]], "dict[str, Any]": {},
                          "list[dict[str, Any]]": [], "str | dict[str, Any]": "uniform"}


def _operations() -> set[tuple[str, str]]:
    schema = create_app(Settings(redis_url="redis://127.0.0.1:1", admin_token="t" * 32)
                        ).openapi()
    return {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}


def _template(path: str, templates: set[str]) -> str | None:
    """The operation path ``path`` was sent to (None: none)."""
    for template in templates:
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path):
            return template
    return None


def _reached(method: Callable[..., Any], sent: list[tuple[str, str]]) -> None:
    """Call ``method`` with a placeholder for each required argument (the answers are
    placeholders too: what it does with them does not matter here)."""
    args = [_DUMMY[str(p.annotation)] for p in inspect.signature(method).parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    before = len(sent)
    try:
        out = method(*args)
        if inspect.isgenerator(out):
            next(out, None)
    except Exception:  # the placeholder answer may not parse: only the request matters
        pass
    assert len(sent) > before, f"{method.__name__} sent nothing"


def test_every_operation_has_a_client_method_or_a_reason() -> None:
    operations = _operations()
    sent: list[tuple[str, str]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append((request.method, request.url.path))
        return httpx.Response(200, json={})

    client = Client("http://test", "key", admin_token="admin",
                    transport=httpx.MockTransport(answer))
    methods = {name: getattr(client, name) for name, _ in inspect.getmembers(Client)
               if not name.startswith("_") and name not in ("send", "close")}
    covered: dict[tuple[str, str], str] = {}
    for name, method in methods.items():
        first = len(sent)
        _reached(method, sent)
        for verb, path in sent[first:]:
            template = _template(path, {p for _, p in operations})
            assert template is not None, f"{name} sends {verb} {path}, not an API operation"
            covered[verb, template] = name
    missing = sorted(operations - set(covered) - set(ABSENT))
    assert not missing, f"API operations without a client method: {missing}"
    assert not set(ABSENT) & set(covered), "an operation ABSENT lists has a method now"
    assert set(ABSENT) <= operations, "ABSENT names an operation the API no longer has"
    asynchronous = {name for name, _ in inspect.getmembers(AsyncClient)
                    if not name.startswith("_")}
    assert set(methods) <= asynchronous, sorted(set(methods) - asynchronous)


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_create_model_takes_every_field_of_the_request(cls: type) -> None:
    from app.api.schemas.models import ModelCreateRequest

    taken = set(inspect.signature(cls.create_model).parameters) - {"self"}
    assert set(ModelCreateRequest.model_fields) <= taken, sorted(
        set(ModelCreateRequest.model_fields) - taken)
