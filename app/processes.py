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


def pool_child() -> None:  # pragma: no cover - runs in a child process
    """Initializer of a process pool's worker: it dies with its parent and leaves Ctrl-C to
    it.  The terminal sends SIGINT to the whole foreground process group; the parent shuts
    the pool down, so the worker ignores it (instead of printing a KeyboardInterrupt
    traceback from its wait for work)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
