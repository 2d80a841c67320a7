"""Per-model click-noise rates: the current (rho0, rho1), their source and history."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import redis.asyncio as aioredis

from app.learners.build import SlotAffine
from app.learners.config import ModelConfig
from app.learners.noise_slots import click_affine
from app.learners.proxy import calibration_unreliable
from app.store import keys
from app.store.jobs import JobQueue, orphaned
from app.store.keys import ModelKeys
from app.store.util import text, utc_now

#: Estimates kept in the history of a noise record.
HISTORY_MAX = 20
#: How long an NREst job's status is kept.
JOB_TTL_SECONDS = 86400
#: Statuses of a job that a new estimate request joins instead of queueing another.
PENDING_STATUSES = ("queued", "running")
NOISE_FIELDS = ("rho0", "rho1", "source", "estimated_at", "n_samples", "history", "estimator",
                "slots", "rates_given", "no_interval", "withdrawn")
#: Reason: the rates in force are an estimate published without an interval (NREst's).
NO_INTERVAL = "no_interval"
#: Reason: the rates in force are an estimate a later refresh withdrew
#: (:func:`app.learners.noise_publish.withdraws`).
WITHDRAWN = "noise_rates_withdrawn"
#: Reason: no estimator can estimate the rates from the model's feedback (only ``fixed``
#: serves it), so the rates in force are the ones given, never checked against the data.
NO_ESTIMATOR = "no_estimator"
#: Why values whose rewards these rates correct cannot be stood behind
#: (:meth:`NoiseRecord.unreliable_reason`).
UNRELIABLE_REASONS = ("noise_rates_unreliable", "noise_rates_estimated", NO_INTERVAL, WITHDRAWN,
                      NO_ESTIMATOR)
#: The estimator of a model that has not chosen one, when its config is not at hand (with it:
#: :func:`~app.learners.build.default_estimator`).
DEFAULT_ESTIMATOR = "anchor"


@dataclass(frozen=True)
class NoiseRecord:
    """Current noise rates of a model and where they come from."""

    rho0: float
    rho1: float
    source: str
    estimated_at: str | None = None
    n_samples: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    estimator: str = DEFAULT_ESTIMATOR
    slots: list[dict[str, Any]] | None = None
    """Per slot ``theta``, ``rho0``, ``rho1``, their intervals and which are ``published``,
    when the per-slot estimate in force is published whole or its examination alone
    (:func:`app.learners.noise_publish.slots_outcome`); ``rho0`` is slot 0's when whole."""
    rates_given: bool = False
    """Whether the model's creation named its initial rates (its ``rho0``/``rho1`` params),
    0 and 0 included."""
    interval: bool = True
    """Whether estimated rates came with an interval (NREst's do not: rates whose error
    nobody knows are flagged, reason :data:`NO_INTERVAL`)."""
    withdrawn: str = ""
    """Why a later refresh withdrew the estimate in force (its refusal's reason,
    :data:`app.learners.noise_publish.WITHDRAWING`), empty unless it did: its rates stay in
    use, flagged, until an estimate is published again (or rates are configured)."""
    estimable: bool = True
    """Whether an estimator can estimate the rates from the model's feedback; without one
    (a learner that corrects clicks it learns as rewards, the ``continuous`` task's) the
    rates are never reliable, reason :data:`NO_ESTIMATOR`."""

    @property
    def published_slots(self) -> list[dict[str, Any]] | None:
        """:attr:`slots` when the per-slot estimate in force is published whole (rows of
        records written before examination had its own gate were), else None."""
        if not self.slots or not all(_published(s, "rho0") for s in self.slots):
            return None
        return self.slots

    @property
    def examination_slots(self) -> list[dict[str, Any]] | None:
        """:attr:`slots` when every slot's examination ``theta`` is published (the estimate
        published whole, or its examination alone), else None."""
        if not self.slots or not all(_published(s, "theta") for s in self.slots):
            return None
        return self.slots

    @property
    def slot_affine(self) -> SlotAffine | None:
        """``(alpha_k, beta_k)`` of the per-slot estimate in use (None without one):
        ``beta_k = theta_k rho0_k``, ``alpha_k = theta_k (1 - rho1 - rho0_k)``, with the
        rates in force for a ``rho0_k``, ``rho1`` not published (examination alone)."""
        if not self.slots:
            return None
        theta = np.array([s["theta"] for s in self.slots])
        rho0, rho1 = (np.array([s[name] if _published(s, name) else rate for s in self.slots])
                      for name, rate in (("rho0", self.rho0), ("rho1", self.rho1)))
        alpha, beta = click_affine(theta, rho0, rho1)
        return tuple(alpha.tolist()), tuple(beta.tolist())

    @property
    def status(self) -> str:
        """``published`` (the rates are an estimate), ``fixed`` (configured, or an estimator
        that never estimates) or ``insufficient_data`` (initial rates awaiting an estimate, or
        an estimate :attr:`withdrawn`)."""
        if self.source == "estimated":
            return "insufficient_data" if self.withdrawn else "published"
        if self.estimator == "fixed" or self.source == "configured":
            return "fixed"
        return "insufficient_data"

    @property
    def calibration_unreliable(self) -> bool:
        """Whether rewards calibrated with these rates mean little: the rates still await an
        estimate, are an estimate without an interval, or nobody gave them
        (:attr:`rates_reliable`), or ``1 - rho0 - rho1`` is below
        :data:`~app.learners.proxy.CALIBRATION_BETA_MIN`."""
        return calibration_unreliable(self.rho0, self.rho1, self.rates_reliable)

    def unreliable_reason(self, errors_carried: bool = False) -> str | None:
        """Why values whose rewards are corrected by these rates cannot be stood behind, or
        None: :data:`NO_INTERVAL` (an estimate published without an interval),
        :data:`WITHDRAWN` (an estimate a later refresh withdrew),
        ``noise_rates_unreliable`` (:attr:`calibration_unreliable`), or
        ``noise_rates_estimated``: an estimate whose error the intervals leave out (they
        carry it when ``errors_carried``: the estimate's standard errors are drawn per
        resample or propagated).

        >>> NoiseRecord(0.1, 0.2, "estimated", estimator="nrest", interval=False
        ...             ).unreliable_reason(errors_carried=True)
        'no_interval'
        >>> NoiseRecord(0.05, 0.3, "initial", estimator="fixed", rates_given=True,
        ...             estimable=False).unreliable_reason()
        'no_estimator'
        """
        if not self.estimable:
            return NO_ESTIMATOR
        if self.status == "published" and not self.interval:
            return NO_INTERVAL
        if self.withdrawn:
            return WITHDRAWN
        if self.calibration_unreliable:
            return "noise_rates_unreliable"
        return ("noise_rates_estimated" if self.status == "published" and not errors_carried
                else None)

    @property
    def rates_reliable(self) -> bool:
        """Whether the rates are an estimate with an interval, configured, or initial rates
        someone gave (the model's ``rho0``/``rho1`` params) under the ``fixed`` estimator: not
        initial rates awaiting an estimate, nor an estimate without an interval (NREst's), nor
        an estimate :attr:`withdrawn`, nor the 0/0 of a model whose rates nobody gave (``PUT
        .../noise`` configures them; records of models created before :attr:`rates_given`
        was kept count other rates than 0/0 as given); never rates no estimator can check
        (:attr:`estimable`)."""
        if not self.estimable:
            return False
        if self.status == "fixed" and self.source == "initial":
            return self.rates_given or (self.rho0, self.rho1) != (0.0, 0.0)
        if self.status == "published":
            return self.interval
        return self.status != "insufficient_data"

    @property
    def fixed_reason(self) -> str:
        """:data:`NO_ESTIMATOR` for rates no estimator can check, ``rates_not_given`` for the
        ``fixed`` rates of a model whose rates nobody gave, else empty (the reason ``GET
        .../noise`` shows for a ``fixed`` status)."""
        if not self.estimable:
            return NO_ESTIMATOR
        return "rates_not_given" if self.status == "fixed" and not self.rates_reliable else ""


def _published(row: Mapping[str, Any], name: str) -> bool:
    """Whether parameter ``name`` of a stored per-slot row is published."""
    return bool(row.get("published", {}).get(name, True))


def parse_noise(values: Sequence[Any], config: ModelConfig | None = None
                ) -> NoiseRecord | None:
    """A :class:`NoiseRecord` from an HMGET of :data:`NOISE_FIELDS`; a record that names no
    estimator has its model ``config``'s default
    (:attr:`~app.learners.config.ModelConfig.default_estimator`;
    :data:`DEFAULT_ESTIMATOR` without a config); with the config, whether its rates are
    :attr:`~NoiseRecord.estimable` (:func:`estimable`)."""
    (rho0, rho1, source, estimated_at, n_samples, history, estimator, slots, given,
     no_interval, withdrawn) = values
    if rho0 is None or rho1 is None:
        return None
    default = DEFAULT_ESTIMATOR if config is None else config.default_estimator
    return NoiseRecord(float(rho0), float(rho1), text(source) or "initial", text(estimated_at),
                       int(n_samples or 0), orjson.loads(history) if history else [],
                       text(estimator) or default, orjson.loads(slots) if slots else None,
                       text(given) == "1", text(no_interval) != "1", text(withdrawn) or "",
                       config is None or estimable(config))


def estimable(config: ModelConfig) -> bool:
    """Whether some estimator can estimate the rates a model of ``config`` corrects by:
    False only for a learner that takes noise rates which nothing but ``fixed`` serves
    (clicks learned as rewards, which the anchor estimator does not score)."""
    return (not config.learner_class.takes_noise_rates(config.params)
            or config.usable_estimators != ("fixed",))


class NoiseStore:
    """Read and write noise records."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self.jobs = JobQueue(redis, keys.NREST_QUEUE, ModelKeys.job,
                             lambda mk: mk.nrest_staged, JOB_TTL_SECONDS)

    async def get(self, mk: ModelKeys, config: ModelConfig | None = None
                  ) -> NoiseRecord | None:
        """The model's noise record (None when the model is gone), read for its ``config``
        when given (:func:`parse_noise`)."""
        return parse_noise(await self.redis.hmget(mk.noise, list(NOISE_FIELDS)), config)

    async def put(self, mk: ModelKeys, rho0: float, rho1: float, *, source: str,
                  n_samples: int | None = None,
                  slots: list[dict[str, Any]] | None = None,
                  interval: bool = True) -> NoiseRecord | None:
        """Set the rates (``source``: "configured" or "estimated"), the per-slot estimate
        they come from (``slots``; rates without one drop the previous one) and whether an
        estimate came with an interval (``interval``; NREst's does not); rates put are not
        :attr:`~NoiseRecord.withdrawn`.

        Estimates also append ``{"t", "rho0", "rho1", "n_samples"}`` to the
        history (at most :data:`HISTORY_MAX` entries).  Returns the new
        record, or None when the model does not exist.
        """
        now = utc_now()
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(mk.noise)
                    current = parse_noise(await pipe.hmget(mk.noise, list(NOISE_FIELDS)))
                    if current is None:
                        return None
                    history = list(current.history)
                    mapping: dict[str | bytes, str | bytes | float | int] = {
                        "rho0": rho0, "rho1": rho1, "source": source}
                    if source == "estimated":
                        history.append({"t": now, "rho0": rho0, "rho1": rho1,
                                        "n_samples": n_samples or 0})
                        mapping.update(estimated_at=now, n_samples=n_samples or 0,
                                       history=orjson.dumps(history[-HISTORY_MAX:]).decode())
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.hset(mk.noise, mapping=mapping)  # type: ignore[arg-type]
                    if source == "estimated" and not interval:
                        pipe.hset(mk.noise, "no_interval", "1")
                    else:
                        pipe.hdel(mk.noise, "no_interval")
                    pipe.hdel(mk.noise, "withdrawn")
                    if slots is None:
                        pipe.hdel(mk.noise, "slots")
                    else:
                        pipe.hset(mk.noise, "slots", orjson.dumps(slots).decode())
                    await pipe.execute()
                    break
                except aioredis.WatchError:
                    continue
        return await self.get(mk)

    async def withdraw(self, mk: ModelKeys, reason: str) -> bool:
        """Withdraw the published estimate in force (:attr:`NoiseRecord.withdrawn`, ``reason``)
        unless the rates changed meanwhile from a published estimate to anything else
        (configured by hand, say); returns whether it was withdrawn."""
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(mk.noise)
                    current = parse_noise(await pipe.hmget(mk.noise, list(NOISE_FIELDS)))
                    if current is None or current.status != "published":
                        await pipe.reset()  # type: ignore[no-untyped-call]
                        return False
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.hset(mk.noise, "withdrawn", reason)
                    await pipe.execute()
                    return True
                except aioredis.WatchError:
                    continue

    async def queue_estimate(self, mk: ModelKeys) -> str:
        """Queue an NREst run for the model unless one is queued or running; return its id.

        The job is a hash (``status`` "queued" -> "running" -> "done" or
        "failed", ``queued_at``, then the result fields) expiring after a
        day, queued on :attr:`jobs` (:mod:`app.store.jobs`).
        ``mk.pending_job`` names the model's job while it is queued or
        running (and not past its deadline), so that repeated requests share
        one job instead of queueing one each (the queue holds at most one job
        per model).
        """
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(mk.pending_job)
                    pending = text(await pipe.get(mk.pending_job))
                    status, deadline = (None, None) if pending is None else await pipe.hmget(
                        mk.job(pending), ["status", "deadline"])
                    job = {"status": text(status) or "", "deadline": text(deadline) or ""}
                    if pending is not None and not orphaned(job) \
                            and job["status"] in PENDING_STATUSES:
                        await pipe.reset()  # type: ignore[no-untyped-call]
                        return pending
                    job_id = secrets.token_urlsafe(12)
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.hset(mk.job(job_id), mapping={"status": "queued",
                                                       "queued_at": utc_now()})
                    pipe.expire(mk.job(job_id), JOB_TTL_SECONDS)
                    pipe.set(mk.pending_job, job_id, ex=JOB_TTL_SECONDS)
                    self.jobs.stage(pipe, mk, job_id)
                    await pipe.execute()
                    break
                except aioredis.WatchError:
                    continue
        # the queue has a hash tag of its own (another Cluster slot): pushed after the job
        await self.jobs.push(mk, job_id)
        return job_id

    async def job(self, mk: ModelKeys, job_id: str) -> dict[str, str] | None:
        """Status fields of an NREst job, or None when unknown/expired; ``failed`` with a
        ``reason`` when running past its deadline (:func:`app.store.jobs.orphaned`)."""
        raw = await self.redis.hgetall(mk.job(job_id))
        if not raw:
            return None
        job = {text(k) or "": text(v) or "" for k, v in raw.items()}
        orphaned(job, "reason")
        return job

    async def set_job(self, mk: ModelKeys, job_id: str, **fields: str | float) -> None:
        """Update an NREst job's status fields (worker side)."""
        await self.redis.hset(mk.job(job_id), mapping=fields)  # type: ignore[arg-type]
