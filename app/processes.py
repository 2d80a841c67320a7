"""Helpers for the child processes the service starts (embedded Redis, API and pool workers)."""

from __future__ import annotations

import ctypes
import signal
import sys


def die_with_parent() -> None:  # pragma: no cover - runs in a child process
    """Linux: have the kernel send SIGTERM to this process when its parent dies.

    Elsewhere a no-op: a child whose parent was killed outright serves on as an orphan.
    """
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
