"""``/docs`` (Swagger UI) and ``/redoc`` work without internet: every asset they reference is
served by the app itself, from an installed package."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from app.api.docs import ASSETS_PATH

#: Every URL an HTML page references: src=, href= and the JavaScript's string literals
#: ending in an asset's extension.
REFERENCE = re.compile(
    r"""(?:src|href)\s*=\s*["']([^"']+)["']|["']([^"'\s]+\.(?:js|css|png|json))["']""")
CONTENT_TYPES = {".js": "javascript", ".css": "text/css", ".png": "image/png",
                 ".json": "application/json"}


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_page_references_only_assets_the_app_serves(idle_client: TestClient, page: str) -> None:
    r = idle_client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "http://" not in r.text and "https://" not in r.text  # no CDN, no web font
    refs = {a or b for a, b in REFERENCE.findall(r.text)}
    assert "/openapi.json" in refs
    assets = refs - {"/openapi.json"}
    assert {ref.rsplit(".", 1)[-1] for ref in assets} >= (
        {"js", "css", "png"} if page == "/docs" else {"js", "png"})
    for ref in assets:
        assert ref.startswith(ASSETS_PATH + "/"), ref
        asset = idle_client.get(ref)
        assert asset.status_code == 200, ref
        assert CONTENT_TYPES["." + ref.rsplit(".", 1)[-1]] in asset.headers["content-type"], ref
        assert len(asset.content) > 1000, ref


def test_swagger_ui_is_a_version_that_renders_openapi_3_1(idle_client: TestClient) -> None:
    """FastAPI publishes OpenAPI 3.1, which Swagger UI renders from version 5 on."""
    assert idle_client.get("/openapi.json").json()["openapi"].startswith("3.1")
    bundle = idle_client.get(f"{ASSETS_PATH}/swagger-ui-bundle.js").text
    version = re.search(r'PACKAGE_VERSION:"(\d+)\.', bundle)
    assert version is not None and int(version.group(1)) >= 5
