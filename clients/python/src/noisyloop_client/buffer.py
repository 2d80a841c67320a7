"""Buffer feedback events and send them as batches (by size or by age).

A batch request of 1000 events costs the service about as much as a few
single ones, so a client that sends its clicks one by one spends most of its
time (and the service's) on HTTP round trips.  :class:`FeedbackBuffer`
(threads) and :class:`AsyncFeedbackBuffer` (asyncio) collect events and send
one ``POST .../feedback`` with ``{"events": [...]}`` when ``max_events`` are
waiting or the oldest has waited ``max_delay`` seconds, and on ``flush()`` /
``close()``.  Events the service rejects (unknown or duplicate event ids,
bad fields) are kept in :attr:`rejected` with their error, never raised.
A failed flush (service unreachable after the client's retries) keeps the
events for the next flush and raises from ``flush()`` / ``close()`` (and,
for the background timer, from the next ``add``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any, Self

from noisyloop_client.calls import feedback_event
from noisyloop_client.errors import NoisyloopError
from noisyloop_client.http import AsyncClient, Client
from noisyloop_client.types import FeedbackBatchResult

#: The contract's largest feedback batch.
MAX_BATCH = 1000


class _State:
    """Counters and the pending list shared by the sync and async buffers."""

    def __init__(self, model_id: str, max_events: int, max_delay: float) -> None:
        if not 1 <= max_events <= MAX_BATCH:
            raise ValueError(f"max_events must be in [1, {MAX_BATCH}], got {max_events}")
        if max_delay <= 0:
            raise ValueError(f"max_delay must be > 0, got {max_delay}")
        self.model_id = model_id
        self.max_events = max_events
        self.max_delay = max_delay
        self.pending: list[dict[str, Any]] = []
        self.oldest: float | None = None
        self.accepted = 0
        self.rejected: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.batches = 0
        self.error: NoisyloopError | None = None

    def push(self, event_id: str | None, fields: dict[str, Any]) -> bool:
        """Queue one event; True when a flush is due by size."""
        if not self.pending:
            self.oldest = time.monotonic()
        self.pending.append(feedback_event(event_id, fields))
        return len(self.pending) >= self.max_events

    def due(self) -> bool:
        return bool(self.pending) and self.oldest is not None and (
            time.monotonic() - self.oldest >= self.max_delay)

    def take(self) -> list[dict[str, Any]]:
        batch, self.pending, self.oldest = self.pending[:self.max_events], \
            self.pending[self.max_events:], None
        if self.pending:
            self.oldest = time.monotonic()
        return batch

    def restore(self, batch: list[dict[str, Any]]) -> None:
        self.pending[:0] = batch
        self.oldest = time.monotonic()

    def record(self, batch: list[dict[str, Any]], result: FeedbackBatchResult) -> None:
        self.batches += 1
        self.accepted += int(result["accepted"])
        for item in result["rejected"]:
            self.rejected.append((batch[item["index"]], item["error"]))


class FeedbackBuffer:
    """Thread-safe feedback batcher over a :class:`~noisyloop_client.http.Client`.

    Examples
    --------
    ``with FeedbackBuffer(client, "banner", max_events=500, max_delay=0.5) as buf:
    buf.add(event_id, click=True)``; on exit the rest is sent.
    """

    def __init__(self, client: Client, model_id: str, *, max_events: int = MAX_BATCH,
                 max_delay: float = 1.0) -> None:
        self.client = client
        self._state = _State(model_id, max_events, max_delay)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self._timer = threading.Thread(target=self._tick, name="feedback-buffer", daemon=True)
        self._timer.start()

    @property
    def accepted(self) -> int:
        return self._state.accepted

    @property
    def rejected(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """``(event, error)`` of every event the service refused."""
        return self._state.rejected

    @property
    def batches(self) -> int:
        return self._state.batches

    def __len__(self) -> int:
        return len(self._state.pending)

    def add(self, event_id: str | None = None, **fields: Any) -> None:
        """Queue one event (``click=True``, ``label=3``, ...); sends a batch when full."""
        with self._lock:
            if self._state.error is not None:
                error, self._state.error = self._state.error, None
                raise error
            full = self._state.push(event_id, fields)
        if full:
            self._send_one()

    def _send_one(self) -> None:
        with self._send_lock:
            with self._lock:
                batch = self._state.take()
            if not batch:
                return
            try:
                result = self.client.feedback_batch(self._state.model_id, batch)
            except NoisyloopError:
                with self._lock:
                    self._state.restore(batch)
                raise
            with self._lock:
                self._state.record(batch, result)

    def flush(self) -> None:
        """Send everything queued now (several batches if needed)."""
        while len(self._state.pending):
            self._send_one()

    def _tick(self) -> None:
        period = min(self._state.max_delay / 2, 0.1)
        while not self._stop.wait(period):
            with self._lock:
                due = self._state.due()
            if due:
                try:
                    self._send_one()
                except NoisyloopError as exc:
                    with self._lock:
                        self._state.error = exc

    def close(self) -> None:
        """Stop the timer and send what is left."""
        self._stop.set()
        self._timer.join()
        self.flush()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncFeedbackBuffer:
    """Asyncio feedback batcher over an :class:`~noisyloop_client.http.AsyncClient`.

    ``add`` is a coroutine (it awaits the send of a full batch); a background
    task sends batches whose oldest event waited ``max_delay``.
    """

    def __init__(self, client: AsyncClient, model_id: str, *, max_events: int = MAX_BATCH,
                 max_delay: float = 1.0) -> None:
        self.client = client
        self._state = _State(model_id, max_events, max_delay)
        self._send_lock = asyncio.Lock()
        self._timer = asyncio.create_task(self._tick())

    @property
    def accepted(self) -> int:
        return self._state.accepted

    @property
    def rejected(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        return self._state.rejected

    @property
    def batches(self) -> int:
        return self._state.batches

    def __len__(self) -> int:
        return len(self._state.pending)

    async def add(self, event_id: str | None = None, **fields: Any) -> None:
        if self._state.error is not None:
            error, self._state.error = self._state.error, None
            raise error
        if self._state.push(event_id, fields):
            await self._send_one()

    async def _send_one(self) -> None:
        async with self._send_lock:
            batch = self._state.take()
            if not batch:
                return
            try:
                result = await self.client.feedback_batch(self._state.model_id, batch)
            except NoisyloopError:
                self._state.restore(batch)
                raise
            self._state.record(batch, result)

    async def flush(self) -> None:
        while self._state.pending:
            await self._send_one()

    async def _tick(self) -> None:
        period = min(self._state.max_delay / 2, 0.1)
        while True:
            await asyncio.sleep(period)
            if self._state.due():
                try:
                    await self._send_one()
                except NoisyloopError as exc:
                    self._state.error = exc

    async def close(self) -> None:
        self._timer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._timer
        await self.flush()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
