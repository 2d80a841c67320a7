"""Logging set-up: structured JSON lines (with request id, tenant, model) off a TTY."""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar
from typing import Any

import orjson

#: Id of the current request (set by the API middleware; None elsewhere).
request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
#: Extra context fields of the current request (tenant, model).
request_fields: ContextVar[dict[str, Any] | None] = ContextVar("request_fields", default=None)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request context."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = request_id.get()
        if rid is not None:
            doc["request_id"] = rid
        doc.update(request_fields.get() or {})
        for key in ("method", "path", "status", "duration_ms", "tenant", "model"):
            if hasattr(record, key):
                doc[key] = getattr(record, key)
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


def configure_logging(level: str = "INFO", json_logs: bool | None = None) -> None:
    """Root handler on stderr; JSON unless stderr is a TTY (or ``json_logs`` says)."""
    use_json = (not sys.stderr.isatty()) if json_logs is None else json_logs
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if use_json else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
