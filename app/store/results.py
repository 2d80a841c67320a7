"""Named results of the Lua scripts (``app/store/lua``) that refuse a change.

A script that changes a model returns the new version (or 1) when it did the
change, else one of these codes; its comment and its ``return`` lines name
the member (``return -3  -- GONE``).  The codes are negative so that they
never collide with a version.
"""

from __future__ import annotations

import enum


class ScriptResult(enum.IntEnum):
    """Why a script refused a change."""

    MOVED = -1
    """The version or config read has changed since (someone published or reconfigured)."""
    LEASE_LOST = -2
    """The trainer lease belongs to another owner."""
    GONE = -3
    """The model is gone."""
    NAME_TAKEN = -4
    """The challenger name is taken."""
    BEHIND = -5
    """The challenger has not saved the model's last published batch yet."""
    FAILED = -6
    """The challenger's learner failed."""
    CHALLENGER_CHANGED = -7
    """The challenger is gone or changed since it was read."""
    FULL = -8
    """The model has its maximum number of challengers."""
    NOT_KEPT = -9
    """The version asked for is not kept."""
