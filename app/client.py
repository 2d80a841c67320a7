"""Deprecated name of the Python client: import :mod:`noisyloop_client` instead.

The client is its own distribution (``pip install ./clients/python``,
import name ``noisyloop_client``); ``from app.client import Client`` still
works and warns (DeprecationWarning), so code written against the old name
keeps running until it is moved.
"""

from __future__ import annotations

import warnings
from typing import Any

import noisyloop_client

__all__ = noisyloop_client.__all__


def __getattr__(name: str) -> Any:
    """``noisyloop_client``'s public ``name``, with a DeprecationWarning."""
    if name not in noisyloop_client.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"app.client is deprecated: use `from noisyloop_client import {name}`",
                  DeprecationWarning, stacklevel=2)
    return getattr(noisyloop_client, name)
