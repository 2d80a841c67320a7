"""The errors a request can get, as data: a status, a snake_case code, a message and the
JSON path of the field at fault.

Tasks, feature parsing and the API raise :class:`ApiError`; the API
(:mod:`app.api.errors`) answers it as ``{"error": {"code", "message", "field"}}`` with its
status.  Nothing here knows HTTP frameworks: a worker process may import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

from pydantic import BaseModel

from app.learners.registry import did_you_mean


class ApiError(Exception):
    """An error a request gets: its HTTP status, snake_case code, message, JSON path of the
    field."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers

    def body(self) -> dict[str, Any]:
        """The ``{"error": ...}`` document."""
        return error_body(self.code, self.message, self.field)


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


def field_path(loc: Sequence[int | str], skip_root: bool = True) -> str | None:
    """``("body", "instances", 3, "<dense>", 7)`` -> ``"instances[3][7]"``.

    Union tags (``"<...>"``) and pydantic's type markers (``"list[...]"``,
    ``"function-after[...]"``) are dropped.
    """
    parts: list[str] = []
    items = list(loc)
    if skip_root and items and items[0] in ("body", "query", "path", "header"):
        items = items[1:]
    for item in items:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item.startswith("<") or "[" in item:
            continue
        else:
            parts.append(f".{item}" if parts else item)
    return "".join(parts) or None


#: What pydantic puts before the message of a ``ValueError`` raised in a validator.
_VALUE_ERROR_PREFIX = "Value error, "


def model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (``X``, ``X | None``), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    models = [m for m in map(model_of, get_args(annotation)) if m is not None]
    return models[0] if len(models) == 1 else None


def _taken_fields(model: type[BaseModel] | None, loc: Sequence[int | str]
                  ) -> tuple[str, list[str]]:
    """Which object of a body of ``model`` holds the field at ``loc`` (``"the body"`` or its
    path) and the fields that object takes (none when not known: a union, a list)."""
    items = list(loc[1:] if loc and loc[0] == "body" else loc)[:-1]
    for name in items:
        field = model.model_fields.get(name) if isinstance(name, str) and model else None
        model = model_of(field.annotation) if field is not None else None
    taken = list(model.model_fields) if model is not None else []
    return field_path(items, skip_root=False) or "the body", taken


def validation_error(errors: Sequence[Any], prefix: str = "",
                     fields: Sequence[str] = (), what: str = "the body",
                     model: type[BaseModel] | None = None) -> ApiError:
    """The first pydantic error as a 422 ``invalid_request`` naming its field; a field the
    body does not take comes first (a misspelt name also leaves the field it misspells
    missing).

    ``fields`` are the fields ``what`` takes: a field it does not take is
    answered with them (and the closest one, if it looks misspelt); with the body's
    ``model`` instead, those of the object holding it.
    """
    unknown = [e for e in errors if e.get("type") == "extra_forbidden"]
    first = (unknown or list(errors) or [{"loc": (), "msg": "invalid request"}])[0]
    loc = tuple(first.get("loc", ()))
    path = field_path(loc)
    if prefix:
        path = f"{prefix}.{path}" if path and not path.startswith("[") else f"{prefix}{path or ''}"
    message = str(first.get("msg", "invalid value")).removeprefix(_VALUE_ERROR_PREFIX)
    if first.get("type") == "json_invalid":
        ctx = first.get("ctx")
        reason = (ctx.get("error") if isinstance(ctx, dict) else None) or message
        where = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        return ApiError(422, "invalid_json", f"body is not valid JSON: {reason}{where}")
    if first.get("type") == "missing" and path is None:
        return ApiError(422, "invalid_request", "a JSON body is required")
    if first.get("type") == "extra_forbidden":
        if model is not None:
            what, fields = _taken_fields(model, loc)
        elif len(loc) != 1:
            fields = ()
        if fields:
            name = str(loc[-1])
            message = (f"{what} takes no {name!r}{did_you_mean(name, list(fields))}; it takes "
                       + ", ".join(fields))
    return ApiError(422, "invalid_request", message, path)
