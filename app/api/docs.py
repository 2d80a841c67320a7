"""The interactive API docs, Swagger UI at ``/docs`` and ReDoc at ``/redoc``, served offline.

FastAPI's own pages load Swagger UI's and ReDoc's JavaScript, CSS and icon
from CDNs, so they stay blank on a machine without internet.  These pages
are the same, but every asset comes from the ``fastapi-offline`` package
(Swagger UI 5, ReDoc 2), served by the app under :data:`ASSETS_PATH`.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

#: Where the app serves the assets.
ASSETS_PATH = "/docs/assets"
#: The installed assets: swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js, favicon.png.
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
#: Swagger UI options: no validator badge (it would ask validator.swagger.io).
SWAGGER_UI_PARAMETERS = {"validatorUrl": None}


def install_docs(app: FastAPI, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Add the two pages and their assets to ``app`` (built with ``docs_url=None`` and
    ``redoc_url=None``, so that FastAPI adds its CDN pages on neither path)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=root + openapi_url, title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            swagger_ui_parameters={**SWAGGER_UI_PARAMETERS, **(app.swagger_ui_parameters or {})})

    @app.get(redoc_url, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=root + openapi_url, title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png", with_google_fonts=False)
