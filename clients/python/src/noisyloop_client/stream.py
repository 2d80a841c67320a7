"""WebSocket sessions for high-rate predict/feedback loops (``/v1/models/{id}/stream``).

One socket carries many requests; the service answers them in the order they
were sent, so a session may keep many requests in flight (pipelining) and
match each answer to the oldest outstanding request.  :class:`AsyncStream`
lets any number of coroutines share one socket; :class:`Stream` is the
blocking form, with :meth:`Stream.pipeline` to keep a window of requests in
flight from one thread.

An error answer to one message raises (or returns) a
:class:`~noisyloop_client.errors.NoisyloopError` with the HTTP ``status`` the
same request would get (None from a service that does not send it) and never
closes the socket; a refused key closes it with code 4401, raised as
``NoisyloopError(401, "unauthenticated")`` on the next call.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from typing import Any, Self
from urllib.parse import quote

from noisyloop_client import calls, codec
from noisyloop_client.errors import ConnectionFailed, NoisyloopError
from noisyloop_client.types import Features, Prediction, Ranking

AUTH_FAILED = 4401
#: ``id`` of the first-message authentication.  The service may or may not
#: answer it, so its answer (if any) is skipped rather than waited for.
AUTH_ID = "auth"


def stream_url(base_url: str, model_id: str) -> str:
    """``ws(s)://host/v1/models/{id}/stream`` for an ``http(s)://host`` base URL."""
    base = base_url.rstrip("/")
    if base.startswith("http"):
        base = "ws" + base[len("http"):]
    return f"{base}/v1/models/{quote(model_id, safe='')}/stream"


def _message(msg_id: int, op: str, body: dict[str, Any]) -> bytes:
    return codec.dumps({"op": op, "id": msg_id, **body})


def _auth_message(api_key: str) -> bytes:
    return codec.dumps({"op": "auth", "id": AUTH_ID, "api_key": api_key})


def _is_auth_answer(reply: Any) -> bool:
    return isinstance(reply, dict) and reply.get("id") == AUTH_ID


def _outcome(reply: Any, expected_id: int) -> Any:
    """The ``result`` of one decoded answer, or a NoisyloopError for its ``error``."""
    if reply.get("id") != expected_id:
        raise ConnectionFailed(f"answer for message {reply.get('id')!r} while waiting for "
                               f"{expected_id} (out of order)")
    if "error" in reply:
        error = reply["error"]
        status = error.get("status") if isinstance(error, dict) else None
        return NoisyloopError.from_body(status if isinstance(status, int) else None, reply)
    return reply.get("result")


def _closed(exc: BaseException) -> NoisyloopError:
    rcvd = getattr(exc, "rcvd", None)
    if rcvd is not None and rcvd.code == AUTH_FAILED:
        return NoisyloopError(401, "unauthenticated", rcvd.reason or "authentication failed")
    return ConnectionFailed(f"websocket closed: {exc}")


def _raise_or_return(value: Any) -> Any:
    if isinstance(value, NoisyloopError):
        raise value
    return value


class AsyncStream:
    """An authenticated WebSocket session shared by any number of coroutines.

    Use ``async with await AsyncStream.connect(url, key, model) as s:``, or
    :meth:`connect` and :meth:`close`.
    """

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._ids = itertools.count()
        self._pending: collections.deque[tuple[int, asyncio.Future[Any]]] = collections.deque()
        self._send_lock = asyncio.Lock()
        self._error: NoisyloopError | None = None
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, base_url: str, api_key: str, model_id: str, *,
                      header_auth: bool = True, max_size: int | None = 2 ** 24) -> AsyncStream:
        """Open the socket; authenticate with the header or (``header_auth=False``) a message."""
        from websockets.asyncio.client import connect

        headers = {"Authorization": f"Bearer {api_key}"} if header_auth else None
        try:
            ws = await connect(stream_url(base_url, model_id), additional_headers=headers,
                               max_size=max_size, compression=None)
        except OSError as exc:
            raise ConnectionFailed(f"websocket connect failed: {exc}") from exc
        if not header_auth:
            await ws.send(_auth_message(api_key), text=True)
        return cls(ws)

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for raw in self._ws:
                reply = codec.loads(raw)
                if _is_auth_answer(reply):
                    continue
                msg_id, fut = self._pending.popleft()
                try:
                    value = _outcome(reply, msg_id)
                except NoisyloopError as exc:
                    value = exc
                if not fut.done():
                    if isinstance(value, NoisyloopError):
                        fut.set_exception(value)
                    else:
                        fut.set_result(value)
            self._error = ConnectionFailed("websocket closed")
        except ConnectionClosed as exc:
            self._error = _closed(exc)
        finally:
            error = self._error or ConnectionFailed("websocket closed")
            while self._pending:
                _, fut = self._pending.popleft()
                if not fut.done():
                    fut.set_exception(error)

    async def request(self, op: str, body: dict[str, Any]) -> Any:
        """Send one message and wait for its answer (other requests may be in flight)."""
        if self._error is not None:
            raise self._error
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        async with self._send_lock:
            msg_id = next(self._ids)
            self._pending.append((msg_id, fut))
            try:
                await self._ws.send(_message(msg_id, op, body), text=True)
            except Exception as exc:
                raise _closed(exc) from exc
        return await fut

    async def predict(self, features: Features, *, explore: bool = True, defer: bool = False,
                      baseline: float | None = None) -> Prediction:
        result: Prediction = await self.request(
            "predict", calls.predict_body(features, explore, defer, baseline))
        return result

    async def predict_batch(self, instances: Any, *, explore: bool = True, defer: bool = False,
                            baseline: list[float] | None = None) -> list[Prediction]:
        answer = await self.request(
            "predict", calls.predict_batch_body(instances, explore, defer, baseline))
        return list(answer["predictions"])

    async def rank(self, features: Features, actions: list[dict[str, Any]], *,
                   slots: int | None = None, explore: bool = True, defer: bool = False,
                   baseline: list[str] | None = None) -> Ranking:
        result: Ranking = await self.request(
            "rank", calls.rank_body(features, actions, slots, explore, defer, baseline))
        return result

    async def rank_batch(self, requests: list[dict[str, Any]]) -> list[Ranking]:
        answer = await self.request("rank", {"requests": requests})
        return list(answer["results"])

    async def feedback(self, event_id: str | None = None, **fields: Any) -> Any:
        return await self.request("feedback", calls.feedback_event(event_id, fields))

    async def feedback_batch(self, events: list[dict[str, Any]]) -> Any:
        return await self.request("feedback", {"events": events})

    async def close(self) -> None:
        await self._ws.close()
        await self._reader

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class Stream:
    """Blocking WebSocket session (one thread); :meth:`pipeline` keeps a window in flight."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._ids = itertools.count()

    @classmethod
    def connect(cls, base_url: str, api_key: str, model_id: str, *,
                header_auth: bool = True, max_size: int | None = 2 ** 24) -> Stream:
        from websockets.sync.client import connect

        headers = {"Authorization": f"Bearer {api_key}"} if header_auth else None
        try:
            ws = connect(stream_url(base_url, model_id), additional_headers=headers,
                         max_size=max_size, compression=None)
        except OSError as exc:
            raise ConnectionFailed(f"websocket connect failed: {exc}") from exc
        if not header_auth:
            ws.send(_auth_message(api_key), text=True)
        return cls(ws)

    def _send(self, op: str, body: dict[str, Any]) -> int:
        msg_id = next(self._ids)
        try:
            self._ws.send(_message(msg_id, op, body), text=True)
        except Exception as exc:
            raise _closed(exc) from exc
        return msg_id

    def _recv(self, msg_id: int) -> Any:
        while True:
            try:
                reply = codec.loads(self._ws.recv())
            except Exception as exc:
                raise _closed(exc) from exc
            if not _is_auth_answer(reply):
                return _outcome(reply, msg_id)

    def request(self, op: str, body: dict[str, Any]) -> Any:
        """One message, one answer (raises NoisyloopError for an error answer)."""
        return _raise_or_return(self._recv(self._send(op, body)))

    def pipeline(self, messages: list[tuple[str, dict[str, Any]]], window: int = 256
                 ) -> list[Any]:
        """Send ``(op, body)`` messages keeping up to ``window`` unanswered; answers in order.

        Error answers are returned as :class:`NoisyloopError` instances in
        their place instead of being raised, so one bad message does not hide
        the answers to the others.
        """
        out: list[Any] = []
        in_flight: collections.deque[int] = collections.deque()
        for op, body in messages:
            if len(in_flight) >= window:
                out.append(self._recv(in_flight.popleft()))
            in_flight.append(self._send(op, body))
        while in_flight:
            out.append(self._recv(in_flight.popleft()))
        return out

    def predict(self, features: Features, *, explore: bool = True, defer: bool = False,
                baseline: float | None = None) -> Prediction:
        result: Prediction = self.request(
            "predict", calls.predict_body(features, explore, defer, baseline))
        return result

    def rank(self, features: Features, actions: list[dict[str, Any]], *,
             slots: int | None = None, explore: bool = True, defer: bool = False,
             baseline: list[str] | None = None) -> Ranking:
        result: Ranking = self.request(
            "rank", calls.rank_body(features, actions, slots, explore, defer, baseline))
        return result

    def feedback(self, event_id: str | None = None, **fields: Any) -> Any:
        return self.request("feedback", calls.feedback_event(event_id, fields))

    def close(self) -> None:
        self._ws.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
