"""An unexpected failure is a JSON 500 that is logged and counted like every other answer,
on the single-predict fast path as on the app's routes."""

from __future__ import annotations

import logging
import re
from typing import Any, NoReturn

import pytest
from starlette.testclient import TestClient

from app.api import deciding
from app.main import create_app
from app.settings import Settings
from tests.api.conftest import ADMIN, ADMIN_TOKEN, new_model, new_tenant

PREDICT = "/v1/models/m1/predict"


def _boom(*args: Any, **kwargs: Any) -> NoReturn:
    raise RuntimeError("a bug")


def server_errors(client: TestClient) -> float:
    """``http_requests_total`` of the predict route with status 500."""
    found = re.search(r'http_requests_total\{method="POST",route="/v1/models/\{model_id\}/predict"'
                      r',status="500"\} (\S+)', client.get("/metrics", headers=ADMIN).text)
    return float(found.group(1)) if found else 0.0


@pytest.mark.parametrize("body,broken", [
    ({"features": [1, 0, 0, 0]}, "predict_cached"),      # the fast path's own answer
    ({"instances": [[1, 0, 0, 0]]}, "predict"),          # the app's route
])
def test_a_500_is_json_logged_and_counted(redis_url: str, monkeypatch: pytest.MonkeyPatch,
                                          caplog: pytest.LogCaptureFixture,
                                          body: dict[str, Any], broken: str) -> None:
    app = create_app(Settings(redis_url=redis_url, admin_token=ADMIN_TOKEN))
    with TestClient(app, raise_server_exceptions=False) as client:  # answer as a server does
        auth = new_tenant(client)
        new_model(client, auth)
        monkeypatch.setattr(deciding, broken, _boom)
        monkeypatch.setattr(deciding, "predict_cached", _boom)
        with caplog.at_level(logging.INFO, logger="app.api.access"):
            r = client.post(PREDICT, json=body, headers=auth)
        assert r.status_code == 500
        assert r.json() == {"error": {"code": "internal_error", "message": "internal error",
                                      "field": None}}
        lines = [rec for rec in caplog.records if rec.name == "app.api.access"
                 and getattr(rec, "status", None) == 500]
        assert len(lines) == 1 and lines[0].path == "/v1/models/{model_id}/predict"
        assert server_errors(client) == 1.0
