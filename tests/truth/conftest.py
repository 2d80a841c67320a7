"""Fixtures of the truth suite: the real app (with its in-process trainer) on the test Redis."""

from __future__ import annotations

from tests.api.conftest import client, tenant

__all__ = ["client", "tenant"]
