"""The console: a small web application at ``/console``, served entirely by the service.

One HTML page, its stylesheet and two scripts (the app and a small SVG
line-chart drawer), all in this package (no build step, no CDN: it works
offline).  The page signs in with a tenant's API key, kept in the browser's
session storage and sent as ``Authorization: Bearer`` (never in a URL), or
with the admin token (every tenant, read only), and draws everything from the
JSON API.  The responses carry a Content-Security-Policy that lets the page
load and call nothing but this origin.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Where the console lives.
CONSOLE_PATH = "/console"
ASSETS_PATH = f"{CONSOLE_PATH}/assets"
STATIC_DIR = Path(__file__).parent / "static"
#: Only this origin: scripts, styles, images and API calls; no framing, no form posts away.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


class _SecurityHeaders:
    """Adds :data:`SECURITY_HEADERS` to every response of the wrapped app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      *((k.encode(), v.encode())
                                        for k, v in SECURITY_HEADERS.items())]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def install_console(app: FastAPI) -> None:
    """Serve the console's page at :data:`CONSOLE_PATH` and its files under
    :data:`ASSETS_PATH`."""
    app.mount(ASSETS_PATH, _SecurityHeaders(StaticFiles(directory=STATIC_DIR)),
              name="console-assets")

    @app.get(CONSOLE_PATH, include_in_schema=False)
    async def console() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers=SECURITY_HEADERS)
