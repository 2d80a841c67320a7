"""A rank learner's per-slot click-noise estimate run in-process, as the service runs it.

:class:`SlotRefresh` takes every learned batch of a learner that logs its
placements; as in the service's trainer and jobs role, every shown slot is a
row (:meth:`~app.learners.base.Learner.placement_rows`, packed by
:func:`~app.learners.noise_publish.pack_slots`) and the per-slot estimate
(:func:`~app.learners.noise_publish.slot_estimate`) runs on the newest
:data:`~app.learners.noise_publish.SLOT_BUFFER` rows when
:func:`~app.learners.noise_publish.anchor_due` says so: every
:data:`~app.learners.noise_publish.ANCHOR_EVERY` new rows, and once more at the
end of the run on the rows still new (a run's end counts as the refresh interval
passed).  A published estimate's slot-0 ``rho0``, ``rho1`` and per-slot affine
correction go to the learner (:func:`~app.learners.build.apply_noise_rates`, as
the trainer applies the noise record); until one is, an estimate whose
examination passes its own gate gives the learner the examination-only
correction at its initial rates (:func:`~app.learners.noise_publish.replaces_slots`,
as the jobs role stores it); an estimate that withdraws a published one
(:func:`~app.learners.noise_publish.withdraws`) leaves its correction in force, flagged
unreliable; any other estimate leaves the one in force.  Every
estimate, published or not, is recorded with its outcome and the events seen ``t``.

The rank replay (:mod:`app.replay.rank`) and the simulator's logged placements
(:func:`app.sim.trust.placements`) both run it.  Pure numpy: no Redis, no HTTP.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.learners.base import Batch, Learner, batch_size
from app.learners.build import apply_noise_rates
from app.learners.noise_publish import (
    SLOT_BUFFER,
    anchor_due,
    outcome,
    pack_slots,
    replaces_slots,
    slot_estimate,
    withdraws,
)
from app.learners.noise_slots import SlotEstimate, click_affine


def keep_newest(columns: dict[str, list[np.ndarray]], keep: int) -> dict[str, np.ndarray]:
    """The newest ``keep`` rows of every column of ``columns`` (lists of arrays, oldest
    first), which from now on hold only those."""
    newest = {k: np.concatenate(v)[-keep:] for k, v in columns.items()}
    columns.update({k: [v] for k, v in newest.items()})
    return newest


class SlotRefresh:
    """A rank learner's per-slot click-noise estimate during a run (module docstring).

    Parameters
    ----------
    learner:
        The learner (it logs its placements); its initial rates are flagged
        unreliable until an estimate is published, as in the service.
    every:
        Rows between two estimates for an experiment of another schedule; None (default):
        the service's (:func:`~app.learners.noise_publish.anchor_due`).
    """

    def __init__(self, learner: Learner, every: int | None = None) -> None:
        self.learner, self.every = learner, every
        self.columns: dict[str, list[np.ndarray]] = {"prob": [], "score": [], "packed": []}
        self.events = self.new = 0
        self.estimates: list[dict[str, Any]] = []
        self.in_force: SlotEstimate | None = None
        """The last estimate published whole or, until one is, by its examination alone
        (the one the learner uses and a service shows)."""
        self.rates = (float(getattr(learner, "rho0", 0.0)), float(getattr(learner, "rho1", 0.0)))
        """The learner's initial rates (in force until an estimate is published whole)."""
        learner.set_noise_reliability(False)

    def observe(self, batch: Batch) -> None:
        """Keep the shown slots of the learned ``batch``; estimate when due."""
        slot, prob, score, click = type(self.learner).placement_rows(batch)
        for name, values in (("prob", prob), ("score", score),
                             ("packed", pack_slots(slot, click))):
            self.columns[name].append(np.asarray(values, dtype=np.float64))
        self.events += batch_size(batch)
        self.new += int(slot.shape[0])
        if (self.new >= self.every) if self.every else anchor_due(self.new, stale=False):
            self.estimate()

    def finish(self) -> None:
        """The end of the run: estimate the rows still new (the interval has passed)."""
        if anchor_due(self.new, stale=True):
            self.estimate()

    def estimate(self) -> SlotEstimate:
        """Run the per-slot estimate on the newest rows, publish it by the one rule and
        record its outcome with the events seen ``t``."""
        self.new = 0
        cols = keep_newest(self.columns, SLOT_BUFFER)
        est = slot_estimate(cols["prob"], cols["score"], cols["packed"])
        out = outcome(est)
        if replaces_slots(est, self.in_force is not None and self.in_force.published):
            rho0, rho1 = (out["rho0"], out["rho1"]) if est.published else self.rates
            rho0_k = est.rho0 if est.published else np.full(est.theta.shape, rho0)
            alpha, beta = click_affine(est.theta, rho0_k, rho1)
            apply_noise_rates(self.learner, rho0, rho1, reliable=est.published,
                              slot_noise=(tuple(alpha.tolist()), tuple(beta.tolist())))
            self.in_force = est
        elif self.in_force is not None and self.in_force.published and withdraws(out):
            self.learner.set_noise_reliability(False)  # the correction stays, flagged
        self.estimates.append({"t": self.events, **out})
        return est
