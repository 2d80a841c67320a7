"""Fixtures of the console tests: a real ``noisyloop serve`` and a real headless Chromium
(:mod:`tests.console.harness`).  The browser tests skip, saying why, when no Chromium or no
Playwright is installed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.console.harness import CHROMIUM, Service, launch_browser, run_service


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with run_service(tmp_path_factory.mktemp("console") / "data") as svc:
        yield svc


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("no Chromium installed (apt-get install chromium; .ci/run installs it)")
    pytest.importorskip("playwright.sync_api",
                        reason="Playwright is not installed (pip install -e '.[dev]')")
    with launch_browser() as chromium:
        yield chromium


@pytest.fixture
def page(browser: Any, service: Service) -> Iterator[Any]:
    """A fresh browser context (its own session storage) at 1280 x 900; the requests it
    makes are kept in ``page.requests`` as (method, URL, Authorization header)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.requests = []
    page.on("request", lambda r: page.requests.append(
        (r.method, r.url, r.headers.get("authorization"))))
    page.on("response", lambda r: print("server error", r.status, r.url, r.text()[:500])
            if r.status >= 500 else None)
    page.set_default_timeout(15_000)
    try:
        yield page
    finally:
        context.close()
