"""Sync and async HTTP clients of the noisyloop API (httpx, keep-alive).

Both expose the same methods (one per operation of ``api.md``); the request
each one sends is built in :mod:`noisyloop_client.calls`.  A 503 answer or a
connection failure is retried with exponential backoff
(:class:`~noisyloop_client.calls.RetryPolicy`); any other error answer raises
:class:`~noisyloop_client.errors.NoisyloopError` at once.

Retrying a POST whose answer was lost can send it twice: a repeated feedback
then gets 409 ``duplicate_feedback`` (the first one was accepted), a
repeated predict makes one extra logged decision that never gets feedback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Self, cast

import httpx

from noisyloop_client import calls
from noisyloop_client.calls import UNSET, Call, RetryPolicy, Unset
from noisyloop_client.errors import ConnectionFailed, NoisyloopError
from noisyloop_client.types import (
    Challengers,
    Confusion,
    DeadLetterPage,
    DeadLetterRetried,
    Features,
    FeedbackBatchResult,
    KeyCreated,
    LabelBudget,
    Model,
    Noise,
    Prediction,
    Promoted,
    Ranking,
    Rollback,
    Series,
    Snapshot,
    SyncResult,
    TenantCreated,
    TenantInfo,
    Versions,
)

#: Transport failures worth retrying (the request may not have reached the service).
RETRY_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadError,
                httpx.RemoteProtocolError, httpx.WriteError, httpx.PoolTimeout)
JSON = {"Content-Type": "application/json"}


class _Base:
    """Configuration shared by :class:`Client` and :class:`AsyncClient`."""

    def __init__(self, base_url: str, api_key: str | None, admin_token: str | None,
                 retry: RetryPolicy | None) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.admin_token = admin_token
        self.retry = retry or RetryPolicy()

    def _headers(self, call: Call) -> dict[str, str]:
        token = self.admin_token if call.admin else self.api_key
        headers = dict(JSON) if call.body is not None else {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _retry_delay(self, attempt: int, exc: Exception) -> float | None:
        """Seconds to wait before retrying after ``exc``, or None to give up."""
        if attempt >= self.retry.retries:
            return None
        if isinstance(exc, NoisyloopError):
            if exc.status not in calls.RETRY_STATUSES:
                return None
            return self.retry.delay(attempt, exc.retry_after)
        return self.retry.delay(attempt)


def _give_up(exc: Exception) -> NoisyloopError:
    if isinstance(exc, NoisyloopError):
        return exc
    return ConnectionFailed(f"{type(exc).__name__}: {exc}")


class Client(_Base):
    """Blocking client.

    Parameters
    ----------
    base_url:
        e.g. ``http://127.0.0.1:8000``.
    api_key:
        Tenant key for the model routes.
    admin_token:
        Token of the ``/v1/admin`` routes.
    retry:
        Backoff policy for 503 and connection errors.
    timeout:
        Seconds per request (httpx timeout).
    transport:
        Optional httpx transport (for tests or an in-process ASGI app).
    """

    def __init__(self, base_url: str, api_key: str | None = None, *,
                 admin_token: str | None = None, retry: RetryPolicy | None = None,
                 timeout: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(base_url, api_key, admin_token, retry)
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, call: Call) -> Any:
        """Send ``call`` with retries; return the decoded answer (None for 204)."""
        content = call.content()
        headers = self._headers(call)
        attempt = 0
        while True:
            try:
                r = self._http.request(call.method, call.path, content=content,
                                       params=call.params or None, headers=headers)
                return calls.parse(r.status_code, r.content, r.headers, call)
            except (NoisyloopError, *RETRY_ERRORS) as exc:
                wait = self._retry_delay(attempt, exc)
                if wait is None:
                    raise _give_up(exc) from (None if isinstance(exc, NoisyloopError) else exc)
                time.sleep(wait)
                attempt += 1

    # admin
    def create_tenant(self, tenant_id: str) -> TenantCreated:
        return cast(TenantCreated, self.send(calls.create_tenant(tenant_id)))

    def list_tenants(self) -> list[TenantInfo]:
        return cast(list[TenantInfo], self.send(calls.list_tenants())["tenants"])

    def delete_tenant(self, tenant_id: str) -> None:
        self.send(calls.delete_tenant(tenant_id))

    def create_key(self, tenant_id: str) -> KeyCreated:
        return cast(KeyCreated, self.send(calls.create_key(tenant_id)))

    def revoke_key(self, tenant_id: str, key_id: str) -> None:
        self.send(calls.revoke_key(tenant_id, key_id))

    def list_tenant_models(self, tenant_id: str) -> list[Model]:
        """Every model of a tenant, as the tenant's :meth:`list_models` gives them."""
        return cast(list[Model], self.send(calls.list_tenant_models(tenant_id))["models"])

    # models
    def create_model(self, model_id: str, task: str | None = None,
                     n_features: int | None = None, *, preset: str | None = None,
                     algorithm: str | None = None, n_classes: int | None = None,
                     params: dict[str, Any] | None = None,
                     feedback: dict[str, Any] | None = None, seed: int | None = None,
                     n_action_features: int | None = None, slots: int | None = None,
                     versions: dict[str, Any] | None = None,
                     mode: str | None = None, drift: dict[str, Any] | None = None,
                     label_budget: dict[str, Any] | None = None,
                     max_feature_norm: float | None = None) -> Model:
        """``task`` and ``n_features`` are needed unless ``preset`` (a named set of defaults,
        e.g. ``"personalizer"``) gives them; ``n_action_features`` and ``slots``: rank
        models; ``versions``: ``{"kept",
        "interval_seconds"}`` of the versions kept to roll back to; ``drift``: ``{"action"}``,
        what a detected drift does; ``label_budget``: ``{"budget", "strategy", ...}`` of a
        regression model; ``max_feature_norm``: the largest input norm taken."""
        return cast(Model, self.send(calls.create_model(
            model_id, task, n_features, preset=preset, algorithm=algorithm, n_classes=n_classes,
            params=params, feedback=feedback, seed=seed, n_action_features=n_action_features,
            slots=slots, versions=versions, mode=mode, drift=drift, label_budget=label_budget,
            max_feature_norm=max_feature_norm)))

    def list_models(self) -> list[Model]:
        return cast(list[Model], self.send(calls.list_models())["models"])

    def get_model(self, model_id: str) -> Model:
        return cast(Model, self.send(calls.get_model(model_id)))

    def delete_model(self, model_id: str) -> None:
        self.send(calls.delete_model(model_id))

    def reset_model(self, model_id: str) -> Model:
        return cast(Model, self.send(calls.reset_model(model_id)))

    def get_snapshot(self, model_id: str) -> Snapshot:
        return cast(Snapshot, self.send(calls.get_snapshot(model_id)))

    def put_snapshot(self, model_id: str, snapshot: dict[str, Any]) -> Model:
        return cast(Model, self.send(calls.put_snapshot(model_id, snapshot)))

    def sync(self, model_id: str, timeout: float | None = None) -> SyncResult:
        return cast(SyncResult, self.send(calls.sync(model_id, timeout)))

    def set_drift(self, model_id: str, action: str) -> Model:
        """What a detected drift does (``none``, ``alert``, ``recover``) from the trainer's
        next batch."""
        return cast(Model, self.send(calls.set_drift(model_id, action)))

    def label_budget(self, model_id: str) -> LabelBudget:
        """A regression model's label budget and the labels charged so far."""
        return cast(LabelBudget, self.send(calls.label_budget(model_id)))

    def series(self, model_id: str, limit: int | None = None,
               before: float | None = None) -> Series:
        """The model's quality series, oldest first (the newest ``limit`` points older than
        ``before``; ``next_before`` of the answer reads on back in time)."""
        return cast(Series, self.send(calls.series(model_id, limit, before)))

    def versions(self, model_id: str, limit: int | None = None,
                 before: int | None = None) -> Versions:
        """The kept versions, newest first (at most ``limit``, older than ``before``;
        ``next_before`` of the answer reads on)."""
        return cast(Versions, self.send(calls.versions(model_id, limit, before)))

    def rollback(self, model_id: str, version: int) -> Rollback:
        """Publish kept ``version`` as a new version; the trainer learns on from it."""
        return cast(Rollback, self.send(calls.rollback(model_id, version)))

    def evaluate(self, model_id: str, policy: str | dict[str, Any], *,
                 since: str | None = None, rho0: float | None = None,
                 rho1: float | None = None, bootstrap: int | None = None,
                 train_fraction: float | None = None, until: str | None = None
                 ) -> dict[str, Any]:
        """Queue an off-policy evaluation of ``policy`` (``uniform``, ``logging``,
        ``fixed:N``, ``model``, ``model:greedy``, or ``{"algorithm", "params"}`` trained on
        the first ``train_fraction`` of the events) on every event of the model's decision
        log applied in ``[since, until]`` (default: the whole log, streamed in bounded
        memory): ``{"job_id", "status"}``."""
        return cast(dict[str, Any], self.send(calls.evaluate(model_id, policy, since, rho0,
                                                              rho1, bootstrap,
                                                              train_fraction, until)))

    def evaluation(self, model_id: str, job_id: str) -> dict[str, Any]:
        """An evaluation's status; once ``done``, the JSON of ``noisyloop evaluate``."""
        return cast(dict[str, Any], self.send(calls.evaluation(model_id, job_id)))

    # decision log
    def log(self, model_id: str, *, since: str | None = None, until: str | None = None,
            order: str = "asc", limit: int | None = None) -> Iterator[dict[str, Any]]:
        """The model's decision log, one dict per line (each applied event with its context,
        feedback and model version, and the markers), read page by page as it is iterated:
        applied in ``[since, until]`` (ISO 8601 or Unix seconds), oldest first or newest
        first (``order="desc"``), at most ``limit`` lines (None: all)."""
        for body in self.log_pages(model_id, since=since, until=until, order=order,
                                   limit=limit):
            yield from calls.log_records(body)

    def log_pages(self, model_id: str, *, since: str | None = None, until: str | None = None,
                  order: str = "asc", limit: int | None = None) -> Iterator[bytes]:
        """As :meth:`log`, each page as served (JSON Lines, up to
        :data:`~noisyloop_client.calls.LOG_PAGE` lines)."""
        pages = calls.LogPages(model_id, since, until, order, limit)
        while (call := pages.next_call()) is not None:
            yield pages.read(self.send(call))

    # challengers
    def challengers(self, model_id: str) -> Challengers:
        """The champion's value and each challenger's estimated value against it."""
        return cast(Challengers, self.send(calls.challengers(model_id)))

    def add_challenger(self, model_id: str, name: str, algorithm: str,
                       params: dict[str, Any] | None = None) -> Challengers:
        """Add a challenger (another algorithm and params of the model's task)."""
        return cast(Challengers, self.send(calls.add_challenger(model_id, name, algorithm,
                                                                params)))

    def delete_challenger(self, model_id: str, name: str) -> None:
        self.send(calls.delete_challenger(model_id, name))

    def promote(self, model_id: str, challenger: str,
                previous_as: str | None = "previous") -> Promoted:
        """Make ``challenger`` the champion (atomically); the old champion stays as the
        challenger ``previous_as`` (None: dropped)."""
        return cast(Promoted, self.send(calls.promote(model_id, challenger, previous_as)))

    # dead letters
    def list_dead_letters(self, model_id: str, *, limit: int | None = None,
                          after: str | None = None) -> DeadLetterPage:
        """One page of the events the trainer could not apply, oldest first."""
        return cast(DeadLetterPage, self.send(calls.list_dead_letters(model_id, limit, after)))

    def drop_dead_letter(self, model_id: str, entry_id: str) -> None:
        self.send(calls.drop_dead_letter(model_id, entry_id))

    def drop_dead_letters(self, model_id: str) -> int:
        """Drop every dead letter; returns how many were dropped."""
        return int(self.send(calls.drop_dead_letters(model_id))["dropped"])

    def retry_dead_letter(self, model_id: str, entry_id: str) -> DeadLetterRetried:
        """Put the event back on the model's event stream for the trainer."""
        return cast(DeadLetterRetried, self.send(calls.retry_dead_letter(model_id, entry_id)))

    # predict and feedback
    def predict(self, model_id: str, features: Features, *, explore: bool = True,
                defer: bool = False, baseline: float | None = None) -> Prediction:
        """One decision; ``defer``: no feedback or default until :meth:`activate`;
        ``baseline``: your own label (a continuous model: your action), served by a model
        in apprentice mode."""
        return cast(Prediction, self.send(calls.predict(model_id, features, explore, defer,
                                                        baseline)))

    def predict_batch(self, model_id: str, instances: Any, *, explore: bool = True,
                      defer: bool = False, baseline: list[float] | None = None
                      ) -> list[Prediction]:
        return cast(list[Prediction], self.send(calls.predict_batch(
            model_id, instances, explore, defer, baseline))["predictions"])

    def rank(self, model_id: str, features: Features, actions: list[dict[str, Any]], *,
             slots: int | None = None, explore: bool = True, defer: bool = False,
             baseline: list[str] | None = None) -> Ranking:
        """Rank the candidates ``[{"id", "features"}, ...]`` for the context ``features``;
        feedback: ``feedback(model_id, event_id, clicks=[ids])`` or ``rewards={id: r}``.
        ``baseline``: your own ranking of ids, served by a model in apprentice mode."""
        return cast(Ranking, self.send(calls.rank(model_id, features, actions, slots, explore,
                                                  defer, baseline)))

    def activate(self, model_id: str, event_id: str) -> dict[str, Any]:
        """Activate a decision made with ``defer=True`` (``{"event_id", "active",
        "deadline"}``): it then awaits feedback as any other."""
        return cast(dict[str, Any], self.send(calls.activate(model_id, event_id)))

    def set_mode(self, model_id: str, mode: str) -> Model:
        """Serve ``"online"``, as an ``"apprentice"`` or ``"logging"`` (learning nothing) from
        now on."""
        return cast(Model, self.send(calls.set_mode(model_id, mode)))

    def rank_batch(self, model_id: str, requests: list[dict[str, Any]]) -> list[Ranking]:
        """Many rank requests (``{"features", "actions", "slots"?, "explore"?}`` each)."""
        return cast(list[Ranking], self.send(calls.rank_batch(model_id, requests))["results"])

    def feedback(self, model_id: str, event_id: str | None = None, **fields: Any
                 ) -> dict[str, Any]:
        return cast(dict[str, Any], self.send(calls.feedback(model_id, event_id, fields)))

    def feedback_batch(self, model_id: str, events: list[dict[str, Any]]
                       ) -> FeedbackBatchResult:
        return cast(FeedbackBatchResult, self.send(calls.feedback_batch(model_id, events)))

    # noise and confusion
    def get_noise(self, model_id: str) -> Noise:
        return cast(Noise, self.send(calls.get_noise(model_id)))

    def put_noise(self, model_id: str, rho0: float | None = None, rho1: float | None = None,
                  *, estimator: str | None = None,
                  one_right_label: bool | Unset | None = UNSET,
                  max_width: float | None = None, half_life: float | Unset | None = UNSET
                  ) -> Noise:
        """Set what is given (:func:`calls.put_noise`): ``one_right_label=None`` and
        ``half_life=None`` send ``null`` (the algorithm's setting, the default half-life)."""
        return cast(Noise, self.send(calls.put_noise(model_id, rho0, rho1, estimator,
                                                     one_right_label, max_width, half_life)))

    def estimate_noise(self, model_id: str, *, wait: bool = False,
                       timeout: float | None = None) -> dict[str, Any]:
        return cast(dict[str, Any], self.send(calls.estimate_noise(model_id, wait, timeout)))

    def get_confusion(self, model_id: str) -> Confusion:
        return cast(Confusion, self.send(calls.get_confusion(model_id)))

    def put_confusion(self, model_id: str, matrix: Any) -> Confusion:
        return cast(Confusion, self.send(calls.put_confusion(model_id, matrix)))

    # operations
    def health(self) -> dict[str, Any]:
        return cast(dict[str, Any], self.send(calls.health()))

    def ready(self) -> dict[str, Any]:
        return cast(dict[str, Any], self.send(calls.ready()))


class AsyncClient(_Base):
    """Asyncio client; the same methods as :class:`Client`, as coroutines."""

    def __init__(self, base_url: str, api_key: str | None = None, *,
                 admin_token: str | None = None, retry: RetryPolicy | None = None,
                 timeout: float = 30.0, transport: httpx.AsyncBaseTransport | None = None,
                 max_connections: int = 100) -> None:
        super().__init__(base_url, api_key, admin_token, retry)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout, transport=transport,
            limits=httpx.Limits(max_connections=max_connections,
                                max_keepalive_connections=max_connections))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def send(self, call: Call) -> Any:
        """Send ``call`` with retries; return the decoded answer (None for 204)."""
        content = call.content()
        headers = self._headers(call)
        attempt = 0
        while True:
            try:
                r = await self._http.request(call.method, call.path, content=content,
                                             params=call.params or None, headers=headers)
                return calls.parse(r.status_code, r.content, r.headers, call)
            except (NoisyloopError, *RETRY_ERRORS) as exc:
                wait = self._retry_delay(attempt, exc)
                if wait is None:
                    raise _give_up(exc) from (None if isinstance(exc, NoisyloopError) else exc)
                await asyncio.sleep(wait)
                attempt += 1

    # admin
    async def create_tenant(self, tenant_id: str) -> TenantCreated:
        return cast(TenantCreated, await self.send(calls.create_tenant(tenant_id)))

    async def list_tenants(self) -> list[TenantInfo]:
        return cast(list[TenantInfo], (await self.send(calls.list_tenants()))["tenants"])

    async def delete_tenant(self, tenant_id: str) -> None:
        await self.send(calls.delete_tenant(tenant_id))

    async def create_key(self, tenant_id: str) -> KeyCreated:
        return cast(KeyCreated, await self.send(calls.create_key(tenant_id)))

    async def revoke_key(self, tenant_id: str, key_id: str) -> None:
        await self.send(calls.revoke_key(tenant_id, key_id))

    async def list_tenant_models(self, tenant_id: str) -> list[Model]:
        """As :meth:`Client.list_tenant_models`."""
        return cast(list[Model], (await self.send(calls.list_tenant_models(tenant_id)))["models"])

    # models
    async def create_model(self, model_id: str, task: str | None = None,
                           n_features: int | None = None, *, preset: str | None = None,
                           algorithm: str | None = None, n_classes: int | None = None,
                           params: dict[str, Any] | None = None,
                           feedback: dict[str, Any] | None = None,
                           seed: int | None = None, n_action_features: int | None = None,
                           slots: int | None = None,
                           versions: dict[str, Any] | None = None,
                           mode: str | None = None, drift: dict[str, Any] | None = None,
                           label_budget: dict[str, Any] | None = None,
                           max_feature_norm: float | None = None) -> Model:
        """As :meth:`Client.create_model`."""
        return cast(Model, await self.send(calls.create_model(
            model_id, task, n_features, preset=preset, algorithm=algorithm, n_classes=n_classes,
            params=params, feedback=feedback, seed=seed, n_action_features=n_action_features,
            slots=slots, versions=versions, mode=mode, drift=drift, label_budget=label_budget,
            max_feature_norm=max_feature_norm)))

    async def list_models(self) -> list[Model]:
        return cast(list[Model], (await self.send(calls.list_models()))["models"])

    async def get_model(self, model_id: str) -> Model:
        return cast(Model, await self.send(calls.get_model(model_id)))

    async def delete_model(self, model_id: str) -> None:
        await self.send(calls.delete_model(model_id))

    async def reset_model(self, model_id: str) -> Model:
        return cast(Model, await self.send(calls.reset_model(model_id)))

    async def get_snapshot(self, model_id: str) -> Snapshot:
        return cast(Snapshot, await self.send(calls.get_snapshot(model_id)))

    async def put_snapshot(self, model_id: str, snapshot: dict[str, Any]) -> Model:
        return cast(Model, await self.send(calls.put_snapshot(model_id, snapshot)))

    async def sync(self, model_id: str, timeout: float | None = None) -> SyncResult:
        return cast(SyncResult, await self.send(calls.sync(model_id, timeout)))

    async def set_drift(self, model_id: str, action: str) -> Model:
        """As :meth:`Client.set_drift`."""
        return cast(Model, await self.send(calls.set_drift(model_id, action)))

    async def label_budget(self, model_id: str) -> LabelBudget:
        """As :meth:`Client.label_budget`."""
        return cast(LabelBudget, await self.send(calls.label_budget(model_id)))

    async def series(self, model_id: str, limit: int | None = None,
                     before: float | None = None) -> Series:
        """As :meth:`Client.series`."""
        return cast(Series, await self.send(calls.series(model_id, limit, before)))

    async def versions(self, model_id: str, limit: int | None = None,
                       before: int | None = None) -> Versions:
        """As :meth:`Client.versions`."""
        return cast(Versions, await self.send(calls.versions(model_id, limit, before)))

    async def rollback(self, model_id: str, version: int) -> Rollback:
        """As :meth:`Client.rollback`."""
        return cast(Rollback, await self.send(calls.rollback(model_id, version)))

    async def evaluate(self, model_id: str, policy: str | dict[str, Any], *,
                       since: str | None = None, rho0: float | None = None,
                       rho1: float | None = None, bootstrap: int | None = None,
                       train_fraction: float | None = None, until: str | None = None
                       ) -> dict[str, Any]:
        """As :meth:`Client.evaluate`."""
        call = calls.evaluate(model_id, policy, since, rho0, rho1, bootstrap, train_fraction,
                              until)
        return cast(dict[str, Any], await self.send(call))

    async def evaluation(self, model_id: str, job_id: str) -> dict[str, Any]:
        """As :meth:`Client.evaluation`."""
        return cast(dict[str, Any], await self.send(calls.evaluation(model_id, job_id)))

    # decision log
    async def log(self, model_id: str, *, since: str | None = None,
                  until: str | None = None, order: str = "asc", limit: int | None = None
                  ) -> AsyncIterator[dict[str, Any]]:
        """As :meth:`Client.log` (``async for``)."""
        async for body in self.log_pages(model_id, since=since, until=until, order=order,
                                         limit=limit):
            for record in calls.log_records(body):
                yield record

    async def log_pages(self, model_id: str, *, since: str | None = None,
                        until: str | None = None, order: str = "asc",
                        limit: int | None = None) -> AsyncIterator[bytes]:
        """As :meth:`Client.log_pages` (``async for``)."""
        pages = calls.LogPages(model_id, since, until, order, limit)
        while (call := pages.next_call()) is not None:
            yield pages.read(await self.send(call))

    # challengers
    async def challengers(self, model_id: str) -> Challengers:
        return cast(Challengers, await self.send(calls.challengers(model_id)))

    async def add_challenger(self, model_id: str, name: str, algorithm: str,
                             params: dict[str, Any] | None = None) -> Challengers:
        return cast(Challengers, await self.send(calls.add_challenger(model_id, name, algorithm,
                                                                      params)))

    async def delete_challenger(self, model_id: str, name: str) -> None:
        await self.send(calls.delete_challenger(model_id, name))

    async def promote(self, model_id: str, challenger: str,
                      previous_as: str | None = "previous") -> Promoted:
        return cast(Promoted, await self.send(calls.promote(model_id, challenger, previous_as)))

    # dead letters
    async def list_dead_letters(self, model_id: str, *, limit: int | None = None,
                                after: str | None = None) -> DeadLetterPage:
        """One page of the events the trainer could not apply, oldest first."""
        return cast(DeadLetterPage,
                    await self.send(calls.list_dead_letters(model_id, limit, after)))

    async def drop_dead_letter(self, model_id: str, entry_id: str) -> None:
        await self.send(calls.drop_dead_letter(model_id, entry_id))

    async def drop_dead_letters(self, model_id: str) -> int:
        """Drop every dead letter; returns how many were dropped."""
        return int((await self.send(calls.drop_dead_letters(model_id)))["dropped"])

    async def retry_dead_letter(self, model_id: str, entry_id: str) -> DeadLetterRetried:
        """Put the event back on the model's event stream for the trainer."""
        return cast(DeadLetterRetried,
                    await self.send(calls.retry_dead_letter(model_id, entry_id)))

    # predict and feedback
    async def predict(self, model_id: str, features: Features, *, explore: bool = True,
                      defer: bool = False, baseline: float | None = None) -> Prediction:
        """As :meth:`Client.predict`."""
        return cast(Prediction, await self.send(calls.predict(model_id, features, explore,
                                                              defer, baseline)))

    async def predict_batch(self, model_id: str, instances: Any, *, explore: bool = True,
                            defer: bool = False, baseline: list[float] | None = None
                            ) -> list[Prediction]:
        answer = await self.send(calls.predict_batch(model_id, instances, explore, defer,
                                                     baseline))
        return cast(list[Prediction], answer["predictions"])

    async def rank(self, model_id: str, features: Features, actions: list[dict[str, Any]], *,
                   slots: int | None = None, explore: bool = True, defer: bool = False,
                   baseline: list[str] | None = None) -> Ranking:
        """As :meth:`Client.rank`."""
        return cast(Ranking, await self.send(calls.rank(model_id, features, actions, slots,
                                                        explore, defer, baseline)))

    async def activate(self, model_id: str, event_id: str) -> dict[str, Any]:
        """As :meth:`Client.activate`."""
        return cast(dict[str, Any], await self.send(calls.activate(model_id, event_id)))

    async def set_mode(self, model_id: str, mode: str) -> Model:
        """As :meth:`Client.set_mode`."""
        return cast(Model, await self.send(calls.set_mode(model_id, mode)))

    async def rank_batch(self, model_id: str, requests: list[dict[str, Any]]) -> list[Ranking]:
        """As :meth:`Client.rank_batch`."""
        answer = await self.send(calls.rank_batch(model_id, requests))
        return cast(list[Ranking], answer["results"])

    async def feedback(self, model_id: str, event_id: str | None = None, **fields: Any
                       ) -> dict[str, Any]:
        return cast(dict[str, Any], await self.send(calls.feedback(model_id, event_id, fields)))

    async def feedback_batch(self, model_id: str, events: list[dict[str, Any]]
                             ) -> FeedbackBatchResult:
        return cast(FeedbackBatchResult, await self.send(calls.feedback_batch(model_id, events)))

    # noise and confusion
    async def get_noise(self, model_id: str) -> Noise:
        return cast(Noise, await self.send(calls.get_noise(model_id)))

    async def put_noise(self, model_id: str, rho0: float | None = None,
                        rho1: float | None = None, *, estimator: str | None = None,
                        one_right_label: bool | Unset | None = UNSET,
                        max_width: float | None = None,
                        half_life: float | Unset | None = UNSET) -> Noise:
        """As :meth:`Client.put_noise`."""
        return cast(Noise, await self.send(calls.put_noise(
            model_id, rho0, rho1, estimator, one_right_label, max_width, half_life)))

    async def estimate_noise(self, model_id: str, *, wait: bool = False,
                             timeout: float | None = None) -> dict[str, Any]:
        return cast(dict[str, Any],
                    await self.send(calls.estimate_noise(model_id, wait, timeout)))

    async def get_confusion(self, model_id: str) -> Confusion:
        return cast(Confusion, await self.send(calls.get_confusion(model_id)))

    async def put_confusion(self, model_id: str, matrix: Any) -> Confusion:
        return cast(Confusion, await self.send(calls.put_confusion(model_id, matrix)))

    # operations
    async def health(self) -> dict[str, Any]:
        return cast(dict[str, Any], await self.send(calls.health()))

    async def ready(self) -> dict[str, Any]:
        return cast(dict[str, Any], await self.send(calls.ready()))
