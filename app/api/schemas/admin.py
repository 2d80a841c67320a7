"""Schemas of the admin routes (tenants and API keys)."""

from __future__ import annotations

from pydantic import BaseModel

from app.api.schemas.common import RequestModel, TenantId


class TenantCreateRequest(RequestModel):
    """Body of ``POST /v1/admin/tenants``."""

    tenant_id: TenantId


class TenantCreatedResponse(BaseModel):
    """A new tenant with its first API key (shown once)."""

    tenant_id: str
    api_key: str
    key_id: str


class KeyCreatedResponse(BaseModel):
    """A new API key (shown once)."""

    api_key: str
    key_id: str


class TenantSummary(BaseModel):
    """One tenant in the admin listing."""

    tenant_id: str
    n_models: int
    created_at: str


class TenantListResponse(BaseModel):
    """Every tenant."""

    tenants: list[TenantSummary]
