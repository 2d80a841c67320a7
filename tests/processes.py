"""The processes a test run started, read from ``/proc`` (Linux; elsewhere nothing is found).

:func:`adopt_orphans` makes the test process a child subreaper: a process
whose parent dies (a worker of a supervisor killed with SIGKILL) is
re-parented to the test process instead of init, so it stays among the
:func:`descendants` that :func:`running` finds at the end of the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from pathlib import Path

PROC = Path("/proc")
#: prctl option: orphans of descendants are re-parented to this process (Linux 3.4+).
PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> bool:
    """Make this process the subreaper of its descendants; False where Linux does not."""
    if not sys.platform.startswith("linux"):
        return False
    return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1) == 0


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent id) of ``pid``; None when it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # the command name may hold spaces and ')'
    return fields[0], int(fields[1])


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (dead, waiting to be reaped)."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def descendants(root: int) -> set[int]:
    """The running processes below ``root`` (children, their children...)."""
    parents: dict[int, int] = {}
    for entry in PROC.glob("[0-9]*"):
        stat = _stat(int(entry.name))
        if stat is not None and stat[0] not in ("Z", "X"):
            parents[int(entry.name)] = stat[1]
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def command_line(pid: int) -> str:
    """``pid``'s command line, arguments joined by spaces ('' when it is gone)."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def wait_gone(pids: set[int], timeout: float) -> set[int]:
    """Wait up to ``timeout`` seconds for ``pids`` to end; those still running."""
    deadline = time.monotonic() + timeout
    left = {pid for pid in pids if running(pid)}
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = {pid for pid in left if running(pid)}
    return left


def kill_all(pids: set[int]) -> None:
    """SIGKILL each of ``pids`` that still exists."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
