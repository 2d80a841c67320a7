"""Schemas of kept versions and rollback (``/v1/models/{id}/versions``, ``.../rollback``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from app.api.schemas.common import INTEGRAL, RequestModel
from app.api.schemas.models import MAX_JSON_INT


class KeptVersionResponse(BaseModel):
    """One kept version."""

    version: int
    created_at: str | None = Field(description="when the version was published")
    events_applied: int = Field(description="events the model had applied at that version")
    current: bool = Field(description="the model is at this version now (a trainer that "
                                      "applies events moves it on)")
    reason: str = Field(description="trainer: kept at its interval; otherwise the change "
                                    "that published it (create, reset, import, rollback, "
                                    "promote); before rollback, before promote: the state "
                                    "that change replaced")


#: Kept versions a page of ``GET .../versions`` holds at most (and by default).
MAX_VERSIONS_PAGE = 1000


class VersionsResponse(BaseModel):
    """``GET /v1/models/{id}/versions``: the kept versions, newest first (at most ``limit``
    and :data:`~app.store.paging.MAX_PAGE_BYTES` of them)."""

    version: int = Field(description="the model's version now")
    versions: list[KeptVersionResponse]
    next_before: int | None = Field(
        default=None, description="pass as `before` for the older kept versions (the page "
                                  "was cut by `limit` or by bytes); null when none is left")


class RollbackRequest(RequestModel):
    """``POST /v1/models/{id}/rollback``."""

    version: Annotated[int, Field(strict=True, ge=1, le=MAX_JSON_INT), INTEGRAL] = Field(
        description="a kept version (GET .../versions)")


class RollbackResponse(BaseModel):
    """The kept version's state (and algorithm and params) published as a new version."""

    version: int = Field(description="the new version")
    rolled_back_to: int
