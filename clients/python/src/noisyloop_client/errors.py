"""The one exception type of the client: an API error with its code, message and field."""

from __future__ import annotations

from typing import Any


class NoisyloopError(Exception):
    """An error answer of the service (or of the transport, ``status`` None).

    Attributes
    ----------
    status:
        HTTP status (also of a WebSocket reply; ``None`` for transport failures).
    code:
        The contract's snake_case code (``unknown_model``, ``duplicate_feedback``,
        ...); ``connection_error`` when the service could not be reached.
    message:
        Human sentence from the service.
    field:
        JSON path of the offending input, or ``None``.
    retry_after:
        Seconds from the ``Retry-After`` header of a 503, if any.
    """

    def __init__(self, status: int | None, code: str, message: str, field: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(f"{status or '-'} {code}: {message}"
                         + (f" (field {field})" if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after

    @classmethod
    def from_body(cls, status: int | None, body: Any, retry_after: float | None = None
                  ) -> NoisyloopError:
        """Build from an ``{"error": {...}}`` body (anything else gets code ``http_<status>``)."""
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict) and isinstance(err.get("code"), str):
            return cls(status, err["code"], str(err.get("message", "")), err.get("field"),
                       retry_after)
        return cls(status, f"http_{status}", str(body)[:200], None, retry_after)


class ConnectionFailed(NoisyloopError):
    """The service could not be reached (after the retries)."""

    def __init__(self, message: str) -> None:
        super().__init__(None, "connection_error", message)
