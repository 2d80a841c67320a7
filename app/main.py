"""The FastAPI app factory: a lifespan that opens the store, routers, middleware.

``create_app(settings)`` is what ``noisyloop serve`` / ``noisyloop api`` and
the tests run.  Background roles (the trainer inside ``serve``) are handed in
by the composition root as ``background`` coroutine factories, so the API
never imports :mod:`workers`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

from app.api.context import ApiContext
from app.api.deps import check_credentials
from app.api.docs import install_docs
from app.api.errors import install_error_handlers
from app.api.middleware import BodyLimitMiddleware, ObservabilityMiddleware
from app.api.routes import (
    admin,
    budget,
    challengers,
    confusion,
    deadletters,
    evaluations,
    feedback,
    log,
    models,
    noise,
    ops,
    personalizer,
    predict,
    rank,
    series,
    serving,
    stream,
    versions,
)
from app.console import install_console
from app.metrics import Metrics
from app.server.fastpath import DecisionFastPath
from app.settings import Settings
from app.store import Store

logger = logging.getLogger(__name__)

#: Allocations of new containers between two young garbage collections (CPython: 700).
GC_THRESHOLD = 20_000
#: A background role: given the app's context and a stop event, runs until stopped.
Background = Callable[[ApiContext, asyncio.Event], Coroutine[Any, Any, None]]


class NoisyloopApp(FastAPI):
    """FastAPI with :class:`~app.server.fastpath.DecisionFastPath` outside every layer.

    ``add_middleware`` would put it inside Starlette's error middleware and
    FastAPI's own wrappers, whose cost is what the fast path saves.
    """

    def __init__(self, *, fast_path_options: dict[str, Any], **options: Any) -> None:
        self.fast_path_options = fast_path_options
        super().__init__(**options)

    def build_middleware_stack(self) -> ASGIApp:
        return DecisionFastPath(super().build_middleware_stack(), **self.fast_path_options)


def create_app(settings: Settings | None = None, *, background: Sequence[Background] = (),
               metrics: Metrics | None = None,
               health: Callable[[], str | None] | None = None) -> FastAPI:
    """The noisyloop app; needs ``settings.redis_url``.  ``health``: what is wrong with a
    store the process runs itself (``noisyloop serve``'s embedded one), for ``/healthz``."""
    settings = settings or Settings()
    if settings.redis_url is None:
        raise ValueError("create_app needs settings.redis_url (noisyloop serve starts an "
                         "embedded Redis and sets it)")
    metrics = metrics or Metrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        assert settings.redis_url is not None
        store = Store.from_url(settings.redis_url, socket_timeout=settings.redis_socket_timeout,
                               connect_timeout=settings.redis_connect_timeout)
        ctx = ApiContext.open(settings, store, metrics, health)
        app.state.ctx = ctx
        # Move every object of the start-up (modules, schemas, routes: millions) out of the
        # collector's reach: a full collection of them stalled every request in flight for
        # 60-70 ms, the p99 of a steady single-predict load (docs/benchmarks/service.md).
        gc.collect()
        gc.freeze()
        # A batch body parses into ~10,000 containers: with the default threshold (700) each
        # one set off a dozen young collections (~10% of a 100 x 50-candidate batch rank).
        gc.set_threshold(GC_THRESHOLD)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(role(ctx, stop)) for role in background]
        try:
            yield
        finally:
            stop.set()
            for task in tasks:
                try:
                    await asyncio.wait_for(task, 10)
                except (TimeoutError, asyncio.CancelledError):
                    logger.warning("background role did not stop in time")
                except Exception:
                    logger.exception("background role failed")
            await store.close()

    app = NoisyloopApp(
        title="noisyloop", version="1",
        description="Online learning from noisy, delayed, partial feedback.", lifespan=lifespan,
        docs_url=None, redoc_url=None,  # FastAPI's pages load a CDN; install_docs' do not
        strict_content_type=False,  # a body without Content-Type is read as JSON
        telemetry=None if settings.otel else {"tracing": False, "metrics": False, "logs": False},
        fast_path_options={"templates": {"predict": predict.PREDICT_PATH,
                                         "rank": rank.RANK_PATH}, "metrics": metrics,
                           "max_body_bytes": settings.max_body_bytes,
                           "max_json_depth": settings.max_json_depth,
                           "retry_after_seconds": settings.retry_after_seconds})
    install_error_handlers(app, settings.retry_after_seconds, authenticate=check_credentials)
    install_docs(app)
    app.state.api_routes = []  # by path and method: the Allow header of a 405
    # the hot routes first: the router tries the routes in order (~5% of a single predict)
    for module in (predict, feedback, rank, models, serving, admin, noise, confusion, budget,
                   deadletters, log, evaluations, stream, series, versions, challengers, ops,
                   personalizer):
        app.include_router(module.router)
        app.state.api_routes += module.router.routes
    install_console(app)  # after the API's routes, which the router tries first
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes,
                       max_depth=settings.max_json_depth)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins,
                           allow_methods=["*"], allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(ObservabilityMiddleware, metrics=metrics)
    return app
