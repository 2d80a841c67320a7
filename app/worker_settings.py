"""The worker section of the settings (:attr:`app.settings.Settings.worker`): every knob of
a worker, its default, range and meaning, once.

Values come from the environment (prefix ``NOISYLOOP_WORKER_``, e.g.
``NOISYLOOP_WORKER_BATCH_SIZE``, read by :class:`app.settings.Settings`; the
trainer's two older variables ``NOISYLOOP_TRAINER_BATCH_SIZE`` and
``NOISYLOOP_TRAINER_INTERVAL_SECONDS`` are still read; a misspelt
``NOISYLOOP_WORKER_*`` variable is refused) or from keyword arguments:
``noisyloop worker`` passes the flags it was given, so a flag overrides the
environment, which overrides the default.  ``noisyloop serve`` builds the
same object for its in-process worker.  Unsafe values are refused when the
object is built, naming the field, so a misconfigured worker stops at
start-up.

The command line builds one flag per field (``--batch-size`` for
``batch_size``), its help the field's description: adding a knob here adds
its flag, its environment variable and its validation.
"""

from __future__ import annotations

import logging
import socket
from typing import Annotated, Any, Literal, get_args

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import NoDecode

from app.learners.noise_publish import DEFAULT_NREST_BUFFER
from app.store.decisionlog import DEFAULT_MAX_AGE_SECONDS, DEFAULT_MAX_EVENTS
from app.store.leases import check_worker_id

logger = logging.getLogger(__name__)

ENV_PREFIX = "NOISYLOOP_WORKER_"

#: ``max_dense_cells`` by default: 32 MB of float64 (40 rows of 100,000 features).
DEFAULT_MAX_DENSE_CELLS = 4_000_000

#: The trainer's older variables, still read (a ``NOISYLOOP_WORKER_*`` one wins), and the
#: field each sets.
LEGACY_ENV = {"NOISYLOOP_TRAINER_BATCH_SIZE": "batch_size",
              "NOISYLOOP_TRAINER_INTERVAL_SECONDS": "flush_interval"}

Role = Literal["trainer", "jobs", "sweeper"]
"""The background roles a worker can run (:data:`workers.worker.ROLES` has their handlers)."""


def default_worker_id() -> str:
    """The host name: stable across restarts, so a restarted worker resumes its own entries."""
    return socket.gethostname().split(".")[0] or "worker"


class WorkerSettings(BaseModel):
    """Configuration of one worker process (see the field descriptions).

    A field read from another variable than ``NOISYLOOP_WORKER_<NAME>`` has
    that variable's suffix as its ``validation_alias`` (``worker_id``:
    ``NOISYLOOP_WORKER_ID``); ``populate_by_name`` keeps its name as the
    keyword argument (``WorkerSettings(batch_size=10)``).  A key that is no
    field (a misspelt variable) is refused.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    roles: Annotated[tuple[Role, ...], NoDecode] = Field(
        default=("trainer", "jobs", "sweeper"),
        description="Roles to run, comma-separated: trainer (applies feedback to every model), "
                    "jobs (noise-rate estimates and policy evaluations), sweeper (expires "
                    "decisions whose feedback never came).")
    worker_id: str = Field(
        default_factory=default_worker_id, validation_alias=AliasChoices("worker_id", "id"),
        description="Heartbeat and consumer name in the trainer group; two workers on one host "
                    "need distinct ids (default: the host name; `serve`: serve-<host name>).")
    batch_size: int = Field(
        default=1000, ge=1, le=100_000,
        description="Events the trainer reads for one update (a joined feedback batch is read "
                    "whole); behind (a full read), it doubles its next read of the model, up "
                    "to 8x.")
    flush_interval: float = Field(
        default=0.05, gt=0, le=60,
        description="Seconds the trainer sleeps when no model had a full batch (the longest an "
                    "event waits for a batch to fill).")
    idle_interval: float = Field(
        default=0.5, gt=0, le=60,
        description="Longest the trainer waits between two reads of a model whose stream was "
                    "empty (the wait doubles from flush_interval while it stays empty; an "
                    "entry puts it back on every pass): the most an idle model's first event "
                    "waits more than a busy model's.")
    poll_interval: float = Field(
        default=0.5, gt=0, le=60,
        description="Seconds the NREst and sweeper roles sleep when idle.")
    lease_ttl: float = Field(
        default=10.0, ge=0.1, le=3600,
        description="Seconds a trainer lease lives without renewal (a dead worker's models are "
                    "taken over after this).")
    heartbeat_ttl: float = Field(
        default=15.0, ge=0.1, le=3600,
        description="Seconds this worker's heartbeat lives without refresh (what --check "
                    "reads).")
    max_deliveries: int = Field(
        default=10, ge=1, le=1000,
        description="Deliveries after which an event never applied goes to the dead letters.")
    handler_timeout: float = Field(
        default=120.0, gt=0, le=86_400,
        description="Longest one batch update may take, in seconds.")
    retry_delay: float = Field(
        default=1.0, gt=0, le=300,
        description="Seconds a role waits before retrying a pass that failed (e.g. on an "
                    "unreachable store).")
    nrest_interval: float = Field(
        default=600.0, gt=0, le=7 * 86_400,
        description="Seconds after which NREst re-estimates a model's noise rates if it has new "
                    "samples (besides every n_s new samples).")
    nrest_buffer: int = Field(
        default=DEFAULT_NREST_BUFFER, ge=10, le=1_000_000,
        description="NREst samples kept per model whose parameters set no n_s.")
    nrest_timeout: float = Field(
        default=300.0, gt=0, le=86_400,
        description="Longest one NREst fit or policy evaluation may take, in seconds.")
    nrest_threads: bool = Field(
        default=False,
        description="Fit NREst in a thread instead of a child process (a child process keeps "
                    "the fit's CPU time off the trainer's event loop).")
    log_max_events: int = Field(
        default=DEFAULT_MAX_EVENTS, ge=0, le=100_000_000,
        description="Applied events kept in each model's decision log (GET /v1/models/{id}/log), "
                    "the newest, approximately; 0 turns the log off (what it holds still goes "
                    "by age).")
    log_max_age: float = Field(
        default=DEFAULT_MAX_AGE_SECONDS, ge=0, le=366 * 86_400,
        description="Seconds an applied event stays in its model's decision log, approximately "
                    "(0: no age limit).")
    sweep_limit: int = Field(
        default=1000, ge=1, le=100_000,
        description="Expired decisions the sweeper handles per model in one pass.")
    series_interval: float = Field(
        default=10.0, ge=0, le=3600,
        description="Seconds between two points of a model's quality series (GET "
                    ".../series; the newest 2,000 are kept); 0 records none.")
    series_events: int = Field(
        default=1000, ge=0, le=10_000_000,
        description="Most events between two points of a model's quality series (a point "
                    "closes after series_interval seconds or this many events, whichever "
                    "comes first; a trainer batch larger than this is one point); 0: by time "
                    "only.")
    max_dense_cells: int = Field(
        default=DEFAULT_MAX_DENSE_CELLS, ge=1, le=2**34,
        description="Most float64 cells of contexts made dense at once: a predict batch, a "
                    "trainer step and a drift recovery's refit take their rows in spans of at "
                    "most this many cells (rows x n_features; the default, 4,000,000, is 32 "
                    "MB; a row a span at least), so wide sparse contexts cost their "
                    "non-zeros, not their width. An evaluation's batch holds its rows and "
                    "their stack within it. The API reads it from this section too.")

    @field_validator("roles", mode="before")
    @classmethod
    def _role_list(cls, value: Any) -> Any:
        """A comma-separated string or a sequence; duplicates dropped, order kept."""
        names = value.split(",") if isinstance(value, str) else value
        if not isinstance(names, list | tuple):
            return value
        roles = list(dict.fromkeys(_renamed(str(name).strip()) for name in names
                                   if str(name).strip()))
        if not roles:
            raise ValueError("no role given")
        return tuple(roles)

    @field_validator("worker_id")
    @classmethod
    def _valid_worker_id(cls, value: str) -> str:
        return check_worker_id(value)

    @classmethod
    def env_var(cls, name: str) -> str:
        """The environment variable of field ``name``."""
        alias = cls.model_fields[name].validation_alias
        suffix = alias.choices[-1] if isinstance(alias, AliasChoices) else name
        return ENV_PREFIX + str(suffix).upper()

    @classmethod
    def field_named(cls, key: str) -> str:
        """The field that ``key`` (a field name, its alias or an environment variable of it)
        sets; ``key`` itself when none does."""
        for name in cls.model_fields:
            if key.upper() in (name.upper(), cls.env_var(name),
                               cls.env_var(name).removeprefix(ENV_PREFIX)):
                return name
        return LEGACY_ENV.get(key.upper(), key)


#: Former role names still accepted (with a warning) and the role each now is.
RENAMED_ROLES: dict[str, Role] = {"nrest": "jobs"}


def _renamed(name: str) -> str:
    """``name`` as a role: a former role name means its new name, a learner algorithm's name
    means the trainer.

    Deprecated: ``nrest`` is the ``jobs`` role (it runs every queued job, not
    only NREst); an in-order learner once ran in a role named after it; the
    trainer now trains every learner, and such a role name is accepted, with
    a warning, as ``trainer``.
    """
    if name in get_args(Role):
        return name
    if name in RENAMED_ROLES:
        logger.warning("role %r is deprecated: it is called %r now; use --roles %s", name,
                       RENAMED_ROLES[name], RENAMED_ROLES[name])
        return RENAMED_ROLES[name]
    from app.learners import registry

    if any(name == algorithm for _, algorithm in registry.ALGORITHMS):
        logger.warning("role %r is deprecated and means 'trainer' (the trainer trains every "
                       "learner); use --roles trainer", name)
        return "trainer"
    return name
