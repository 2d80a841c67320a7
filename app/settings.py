"""The one typed configuration of the API, the workers and the command line.

Values come from the environment (prefix ``NOISYLOOP_``; the Redis URL also
from plain ``REDIS_URL``) or from keyword arguments (the command line passes
its flags this way).  The workers' knobs are the ``worker`` section
(:class:`app.worker_settings.WorkerSettings`), read from ``NOISYLOOP_WORKER_*``
(``NOISYLOOP_WORKER_BATCH_SIZE`` sets ``worker.batch_size``: ``_`` after the
prefix's ``WORKER`` is the nesting delimiter, split once); a misspelt
``NOISYLOOP_WORKER_*`` variable is refused, naming it.  Unsafe values are
refused when the object is built, so a misconfigured process stops at
start-up instead of misbehaving later.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.worker_settings import LEGACY_ENV, WorkerSettings

#: Shortest admin token accepted (a token shorter than this is guessable).
MIN_ADMIN_TOKEN_CHARS = 24
#: The contract fixes batch sizes at 1..1000 (predict instances, feedback events).
MAX_BATCH = 1000
#: Accepted Redis URL schemes (the ``+cluster`` ones select a Redis Cluster).
REDIS_URL_SCHEMES = ("redis://", "rediss://", "unix://", "redis+cluster://", "rediss+cluster://")


class Settings(BaseSettings):
    """noisyloop configuration (see the field descriptions for defaults and meaning)."""

    model_config = SettingsConfigDict(env_prefix="NOISYLOOP_", extra="ignore",
                                      populate_by_name=True, env_nested_delimiter="_",
                                      env_nested_max_split=1)

    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("redis_url", "NOISYLOOP_REDIS_URL", "REDIS_URL"),
        description="Redis URL (redis://, rediss:// or unix://). A Redis Cluster: "
                    "redis+cluster://host:port[,host:port...] (or rediss+cluster://), any "
                    "nodes of the cluster as seeds. None: `serve` starts an embedded "
                    "redis-server under data_dir.",
    )
    data_dir: Path = Field(default=Path("./data"),
                           description="Embedded Redis files (AOF) and the generated admin token.")
    admin_token: SecretStr | None = Field(
        default=None, description="Bearer token of the /v1/admin routes; None disables them "
                                  "(`serve` generates one in data_dir on first start).")
    metrics_token: SecretStr | None = Field(
        default=None, description="Bearer token of /metrics (and of a worker's metrics port), "
                                  "for Prometheus; the admin token is accepted too. None: only "
                                  "the admin token (the series name every tenant and model).")
    host: str = Field(default="127.0.0.1", description="Address the HTTP server binds.")
    port: int = Field(default=8000, ge=0, le=65535, description="HTTP port.")

    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024,
                                description="Largest request body (and WebSocket message).")

    max_json_depth: int = Field(default=32, ge=4, le=512,
                                description="Deepest nesting of arrays/objects in a request body "
                                            "or WebSocket message (checked before parsing).")
    max_models_per_tenant: int = Field(
        default=1000, ge=1, le=1_000_000,
        description="Models one tenant may hold; creating one more answers 409 limit_reached "
                    "(checked before the create: concurrent creates may pass it by their "
                    "number).")
    max_challengers_per_model: int = Field(
        default=3, ge=0, le=100,
        description="Challengers one model may have (checked in the step that adds one).")
    max_pending_per_model: int = Field(
        default=1_000_000, ge=1, le=100_000_000,
        description="Decisions one model may hold awaiting feedback (pending and deferred); "
                    "a predict or rank that would log more answers 429 limit_reached "
                    "(checked in the Lua step that logs them: nothing is logged).")
    max_context_bytes: int = Field(
        default=8 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024,
        description="Largest stored context of one logged decision (one line of the "
                    "decision log; a sparse context is stored sparse): a decision past it "
                    "answers 413 limit_reached, nothing logged. With "
                    "worker.log_max_events it bounds a model's log in bytes (the default, "
                    "the largest body, refuses only a context its request expanded; lower "
                    "it for shared deployments).")
    max_evaluation_bytes: int = Field(
        default=2 * 2**30, ge=2**20, le=2**40,
        description="Largest reward model an evaluation of the decision log may build (its "
                    "sums X'X: folds x labels or slots x d^2 float64, d the width or, past "
                    "4,096 features, the 512 buckets they are hashed to); a larger "
                    "model's evaluation answers 422 limit_reached before it is queued.")
    max_queued_evaluations_per_model: int = Field(
        default=10, ge=1, le=10_000,
        description="Evaluations one model may hold queued (not yet taken by a worker's "
                    "jobs role); one more answers 429 limit_reached, nothing queued.")
    rate_limit_per_second: float = Field(
        default=0.0, ge=0, le=1_000_000,
        description="Per-tenant request rate (token bucket in Redis, shared by all replicas); "
                    "0 turns rate limiting off (the default: a single-user `serve` never "
                    "throttles itself; set it for shared deployments).")
    rate_limit_burst: int = Field(default=200, ge=1, le=10_000_000,
                                  description="Requests a tenant may send at once (bucket size).")

    redis_socket_timeout: float = Field(default=2.0, gt=0, le=30,
                                        description="Seconds before a Redis command fails.")
    redis_connect_timeout: float = Field(default=1.0, gt=0, le=30,
                                         description="Seconds before a Redis connect fails.")
    retry_after_seconds: int = Field(default=2, ge=1, le=3600,
                                     description="Retry-After of 503 store_unavailable.")
    context_grace_seconds: int = Field(
        default=3600, ge=60, le=7 * 86400,
        description="How long a decision context outlives its wait time, so that a late "
                    "sweeper still finds it (and a duplicate still gets 409).")

    snapshot_cache_size: int = Field(default=256, ge=1, le=100_000,
                                     description="Learners kept per API process.")

    cors_origins: list[str] = Field(default_factory=list,
                                    description="Allowed CORS origins; empty: CORS off.")
    log_level: str = Field(default="INFO", description="Root log level.")
    log_json: bool | None = Field(default=None,
                                  description="JSON logs; None: JSON when stderr is not a TTY.")
    otel: bool = Field(default=False,
                       description="FastAPI's own OpenTelemetry traces, metrics and logs of "
                                   "each request, once an OpenTelemetry SDK is set up in the "
                                   "process; off, no request pays for looking (about 7 us).")
    worker: WorkerSettings = Field(default_factory=WorkerSettings,
                                   description="The workers' section (NOISYLOOP_WORKER_*).")

    @model_validator(mode="before")
    @classmethod
    def _legacy_worker_env(cls, data: Any) -> Any:
        """The trainer's older variables (:data:`~app.worker_settings.LEGACY_ENV`) for the
        worker fields no flag nor ``NOISYLOOP_WORKER_*`` variable set."""
        legacy = {field: os.environ[name] for name, field in LEGACY_ENV.items()
                  if name in os.environ}
        worker = data.get("worker") if isinstance(data, dict) else None
        if not legacy or not isinstance(worker, dict | None):
            return data
        return {**data, "worker": {**legacy, **(worker or {})}}

    @field_validator("admin_token", "metrics_token")
    @classmethod
    def _strong_token(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and len(v.get_secret_value()) < MIN_ADMIN_TOKEN_CHARS:
            raise ValueError(f"a token must have at least {MIN_ADMIN_TOKEN_CHARS} characters")
        return v

    def metrics_tokens(self) -> list[str]:
        """The tokens that may read the metrics: the metrics token and the admin token."""
        return [t.get_secret_value() for t in (self.metrics_token, self.admin_token)
                if t is not None]

    @field_validator("redis_url")
    @classmethod
    def _known_scheme(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(REDIS_URL_SCHEMES):
            raise ValueError("redis_url must start with one of " + ", ".join(REDIS_URL_SCHEMES))
        return v

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, v: str) -> str:
        level = v.upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError(f"unknown log level {v!r}")
        return level

    @model_validator(mode="after")
    def _no_wildcard_cors(self) -> Settings:
        if "*" in self.cors_origins:
            raise ValueError("cors_origins must list origins explicitly, not '*'")
        return self
