"""Mergeable sums of per-event terms, totalled and per hashed bucket, for intervals that
stream.

Every estimator of :mod:`app.evaluation.estimators` is a function of column
sums of per-event terms.  :class:`TermSums` keeps those sums twice: in total
(the point estimates) and per bucket, an event's bucket being a hash of its
*key*, its position in the log (:func:`row_hash`, splitmix64; Steele, Lea &
Flood 2014).  Batches add up and accumulators of other events merge by
addition, so one batch in memory, a stream of Arrow batches, several
processes and Spark tasks give the same sums up to rounding (Chan, Golub &
LeVeque 1979 for the idea; River's ``stats`` for the shape).

**Bucketed bootstrap.**  The percentile bootstrap resamples the
:data:`BUCKETS` buckets with replacement (:func:`resampled_sums` on the
bucket sums): each bucket is a random group of events, so resampling buckets
is resampling events in groups, and with as many buckets as events it is the
ordinary bootstrap (each event drawn about Poisson(1) times).  Each resample
divides by its own event count (a column of the sums), as the ordinary
bootstrap's resample of ``n`` events does.

A log's :class:`Kind` names what its streamed evaluation sums
(:mod:`app.evaluation.streaming`): the reward model's sums and the estimators'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

#: Buckets of the bootstrap (a power of two: a bucket is the hash's low bits).
BUCKETS = 4096
#: Elements of one block of bootstrap index matrix (bounds its memory to ~32 MB).
BOOTSTRAP_BLOCK = 1 << 22

_GOLDEN, _M1, _M2 = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9),
                     np.uint64(0x94D049BB133111EB))


def row_keys(rows: np.ndarray) -> np.ndarray:
    """The keys of the events at ``rows``, their 0-based positions in the log (the lines of
    an export, markers included: whatever reads the log keys an event alike)."""
    out: np.ndarray = rows.astype(np.uint64)
    return out


def row_hash(keys: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of ``keys + (seed + 1) * golden``: 64 well-mixed bits per key."""
    z = keys.astype(np.uint64) + np.uint64((seed + 1) * int(_GOLDEN) % 2**64)
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    out: np.ndarray = z ^ (z >> np.uint64(31))
    return out


def fold_of(hashes: np.ndarray, folds: int) -> np.ndarray:
    """The cross-fitting fold of each event (the hash's high bits)."""
    out: np.ndarray = ((hashes >> np.uint64(32)) % np.uint64(folds)).astype(np.int64)
    return out


def bucket_of(hashes: np.ndarray) -> np.ndarray:
    """The bootstrap bucket of each event (the hash's low bits)."""
    out: np.ndarray = (hashes & np.uint64(BUCKETS - 1)).astype(np.int64)
    return out


@dataclass
class TermSums:
    """Column sums of per-event terms, in total and per bucket (module docstring)."""

    totals: np.ndarray
    """``m`` sums over every event."""
    buckets: np.ndarray
    """``BUCKETS x m`` sums per bucket."""

    @classmethod
    def zeros(cls, columns: int) -> TermSums:
        return cls(np.zeros(columns), np.zeros((BUCKETS, columns)))

    def add(self, terms: np.ndarray, hashes: np.ndarray) -> None:
        """Add the ``n x m`` terms of events with hashes ``hashes``."""
        self.totals += terms.sum(axis=0)
        bucket = bucket_of(hashes)
        for j in range(terms.shape[1]):
            self.buckets[:, j] += np.bincount(bucket, weights=terms[:, j], minlength=BUCKETS)

    def column(self, j: int) -> TermSums:
        """The sums of column ``j`` alone (a view)."""
        return TermSums(self.totals[j:j + 1], self.buckets[:, j:j + 1])

    def merge(self, other: TermSums) -> None:
        """Add another's sums (of other events)."""
        self.totals += other.totals
        self.buckets += other.buckets

    def resampled(self, n_boot: int, rng: np.random.Generator,
                  progress: Callable[[int], None] | None = None) -> np.ndarray:
        """``n_boot x m`` sums over bootstrap resamples of the buckets."""
        return resampled_sums(self.buckets, n_boot, rng, progress)


def resampled_sums(terms: np.ndarray, n_boot: int, rng: np.random.Generator,
                   progress: Callable[[int], None] | None = None) -> np.ndarray:
    """``n_boot x m`` column sums of the ``n x m`` ``terms`` over bootstrap resamples of
    their rows.

    Resamples are drawn in blocks as index matrices; each row's indices become
    counts (how often each row was drawn, one ``bincount`` for the block),
    and the resampled sums are ``counts @ terms``.
    """
    n = len(terms)
    per_block = max(1, BOOTSTRAP_BLOCK // n)
    index_type = np.int32 if per_block * n < 2**31 else np.int64
    columns = np.ascontiguousarray(terms.T)
    sums = np.empty((n_boot, terms.shape[1]))
    for start in range(0, n_boot, per_block):
        b = min(per_block, n_boot - start)
        offsets = (np.arange(b) * n).astype(index_type)[:, None]
        idx: np.ndarray = rng.integers(0, n, size=(b, n), dtype=index_type)
        idx += offsets
        counts = np.bincount(idx.ravel(), minlength=b * n).reshape(b, n)
        sums[start:start + b] = (columns @ counts.T).T
        if progress is not None:
            progress(b)
    return sums


class FitSums(Protocol):
    """A reward model's mergeable sums."""

    def merge(self, other: Any) -> None: ...

    def fit(self, lam: float) -> Any: ...


class Sums(Protocol):
    """An estimators' mergeable accumulator."""

    @property
    def n(self) -> int: ...

    def add(self, log: Any, target: np.ndarray | None, keys: np.ndarray, options: Any,
            model: Any) -> None:
        """Add a batch's terms (``options``: the estimators'
        :class:`~app.evaluation.estimators.Options`)."""

    def merge(self, other: Any) -> None: ...


@dataclass(frozen=True)
class Kind:
    """What an evaluation of a kind of log sums: the reward model's sums of a batch, and the
    estimators' empty accumulator."""

    reward_sums: Callable[[Any, np.ndarray, Any], FitSums]
    """The reward model's sums of a batch, its keys and the estimators' options."""
    zeros: Callable[[], Sums]
