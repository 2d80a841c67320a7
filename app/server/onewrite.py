"""uvicorn's httptools protocol, writing what a connection sends in one loop turn at once.

uvicorn writes a response's status line and headers (``http.response.start``)
and its body (``http.response.body``) with two ``transport.write`` calls,
and uvloop sends each at once when its buffer is empty: two ``send`` system
calls and two TCP segments per response, which the client then reads with
two ``recv`` calls.  For a small JSON answer, those system calls cost more
CPU than building it (a single predict: ``docs/benchmarks/service.md``).
aiohttp coalesces headers and body into one segment for the same reason
(aiohttp PR 10991).

:class:`CoalescingTransport` keeps the bytes written during one event-loop
turn and writes them with one call when the turn ends (``call_soon``): a
response whose body follows its headers without waiting leaves in one
segment, and the headers of one that waits (a stream) leave at the end of
the turn, not later.  Once a turn has gathered :data:`FLUSH_BYTES`, it
writes at once, so that the transport's flow control (which pauses a writer
whose peer does not read) sees large bodies as before.  A WebSocket
upgraded from the connection keeps the wrapper: its frames of one turn go
out together too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

#: Bytes gathered in one turn that are written at once (uvicorn's high-water mark).
FLUSH_BYTES = HIGH_WATER_LIMIT
#: The ``http`` option of :class:`uvicorn.Config` that selects the protocol below.
PROTOCOL = "app.server.onewrite:OneWriteHttpToolsProtocol"


class CoalescingTransport(asyncio.Transport):
    """A transport that writes the bytes of one event-loop turn with one call to ``inner``.

    Everything else is ``inner``'s: closing writes what is pending first,
    aborting drops it, and nothing is written once ``inner`` is closing.
    """

    def __init__(self, inner: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._inner = inner
        self._loop = loop
        self._pending: list[bytes] = []
        self._pending_size = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(bytes(data))
        self._pending_size += len(data)
        if self._pending_size >= FLUSH_BYTES:
            self.flush()

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Write what is pending now (a no-op when nothing is)."""
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        if not self._inner.is_closing():
            self._inner.write(data)

    def close(self) -> None:
        self.flush()
        self._inner.close()

    def write_eof(self) -> None:
        self.flush()
        self._inner.write_eof()

    def abort(self) -> None:
        self._pending.clear()
        self._pending_size = 0
        self._inner.abort()

    def get_write_buffer_size(self) -> int:
        return self._pending_size + self._inner.get_write_buffer_size()

    def can_write_eof(self) -> bool:
        return self._inner.can_write_eof()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._inner.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._inner.set_write_buffer_limits(high, low)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._inner.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self._inner.is_closing()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._inner.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._inner.get_protocol()

    def is_reading(self) -> bool:
        return self._inner.is_reading()

    def pause_reading(self) -> None:
        self._inner.pause_reading()

    def resume_reading(self) -> None:
        self._inner.resume_reading()


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol on a :class:`CoalescingTransport`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))
