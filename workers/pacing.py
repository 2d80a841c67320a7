"""When the trainer next reads each model it holds: idle models less often, failing ones later.

Reading a model's stream is one Lua step per model and pass; with the pass
every ``flush_interval`` (50 ms), 500 idle models cost 10,000 of them a
second.  So a model whose read came back empty waits twice as long as the
last time before its next read, from ``flush_interval`` up to
``idle_interval``; a read that gives entries puts it back on every pass.  A
model that gets feedback at least every ``flush_interval`` is never slowed;
an idle one's first event waits at most ``idle_interval`` more.

While the worker listens for wake-ups (:mod:`workers.wake`), a model that
already waits ``idle_interval`` is read with its asleep flag: if that read is
empty too, the model sleeps (:meth:`Pacer.asleep`): it is read again only when
a step that adds an entry to its stream wakes it (:meth:`Pacer.wake`), or
after :data:`SLEEP_SECONDS` in case that message was lost.  So idle models
cost the trainer nothing but that rare look.

A model whose step failed is retried after ``retry_delay``, doubling with
each failure up to :data:`MAX_FAILURE_WAIT`, so that a model that fails on
every read (a corrupt snapshot) costs the others little.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from workers import ModelRef

#: Longest wait, in seconds, before retrying a model whose steps keep failing.
MAX_FAILURE_WAIT = 30.0
#: Seconds between two reads of a sleeping model (a wake-up lost with a dropped connection
#: costs at most this).
SLEEP_SECONDS = 30.0


@dataclass
class Pacer:
    """The time (``time.monotonic()``) before which each owned model is not read."""

    flush_interval: float
    idle_interval: float
    retry_delay: float
    _due: dict[ModelRef, float] = field(default_factory=dict)
    _wait: dict[ModelRef, float] = field(default_factory=dict)
    failures: dict[ModelRef, int] = field(default_factory=dict)
    """Consecutive failed steps of each model that failed its last step."""
    _unchecked: set[ModelRef] = field(default_factory=set)
    """Models taken over and not stepped since: a failure record of a previous owner may
    be left in their stats."""

    def due(self, ref: ModelRef, now: float) -> bool:
        """Whether ``ref`` is read in the pass starting at ``now``."""
        return self._due.get(ref, -math.inf) <= now

    def waiting(self, ref: ModelRef) -> bool:
        """Whether ``ref``'s last read was empty (it waits between reads)."""
        return ref in self._wait

    def busy(self, ref: ModelRef) -> None:
        """The read gave entries: read it again next pass."""
        self._due.pop(ref, None)
        self._wait.pop(ref, None)

    def idle(self, ref: ModelRef, now: float) -> None:
        """The read was empty: wait twice the last wait (at least ``flush_interval``, at most
        ``idle_interval``)."""
        wait = min(max(2 * self._wait.get(ref, 0.0), self.flush_interval),
                   max(self.idle_interval, self.flush_interval))
        self._wait[ref] = wait
        self._due[ref] = now + wait

    def sleepy(self, ref: ModelRef) -> bool:
        """Whether ``ref`` waits the longest idle wait already (its next empty read may put
        it to sleep)."""
        return self._wait.get(ref, 0.0) >= max(self.idle_interval, self.flush_interval)

    def asleep(self, ref: ModelRef, now: float) -> None:
        """The read that set the model's asleep flag was empty: read it again when woken,
        or after :data:`SLEEP_SECONDS`."""
        self._wait[ref] = SLEEP_SECONDS
        self._due[ref] = now + SLEEP_SECONDS

    def wake(self, ref: ModelRef) -> None:
        """An entry was added to a waiting model's stream: read it next pass (a failing
        model keeps its retry delay)."""
        if ref in self._wait:
            self.busy(ref)

    def next_due(self, refs: Iterable[ModelRef]) -> float:
        """The earliest time one of ``refs`` is due (-inf: one is due now; inf: none)."""
        return min((self._due.get(ref, -math.inf) for ref in refs), default=math.inf)

    def wake_all(self) -> None:
        """Read every waiting model next pass (wake-ups may have been missed)."""
        for ref in list(self._wait):
            self.busy(ref)

    def failed(self, ref: ModelRef, now: float) -> int:
        """The step raised: retry later; returns the consecutive failures."""
        n = self.failures[ref] = self.failures.get(ref, 0) + 1
        self._wait.pop(ref, None)
        self._due[ref] = now + min(self.retry_delay * 2 ** min(n - 1, 16), MAX_FAILURE_WAIT)
        return n

    def taken(self, ref: ModelRef) -> None:
        """This trainer took the model's lease (see :meth:`succeeded`)."""
        self._unchecked.add(ref)

    def succeeded(self, ref: ModelRef) -> int | None:
        """The step went through: the failed steps before it (0: taken over, it may have
        failed under a previous owner); None when there is no failure record to clear."""
        unchecked = ref in self._unchecked
        self._unchecked.discard(ref)
        failed = self.failures.pop(ref, None)
        return failed if failed is not None else (0 if unchecked else None)

    def forget(self, ref: ModelRef) -> None:
        self._due.pop(ref, None)
        self._wait.pop(ref, None)
        self.failures.pop(ref, None)
        self._unchecked.discard(ref)
