"""Small helpers shared by the store modules."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> str:
    """Current UTC time as an ISO 8601 string (seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def text(value: bytes | str | None) -> str | None:
    """A Redis reply as ``str`` (or None)."""
    if value is None:
        return None
    return value.decode("utf-8") if isinstance(value, bytes) else value


def parse_stream_id(stream_id: bytes | str) -> tuple[int, int]:
    """``"1700000000000-3"`` -> ``(1700000000000, 3)`` for ordering stream ids."""
    ms, _, seq = (text(stream_id) or "0-0").partition("-")
    return int(ms), int(seq or 0)
