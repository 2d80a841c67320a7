"""How often a label model shows published click-noise rates, before and after withdrawal.

The service's pipeline in process (:func:`app.sim.relevance.label_plays`: ``linucb_diag``
at its defaults, the trainer's shadow scorer, rates (0.1, 0.2)), the anchor estimate by
the service's rule every :data:`~app.learners.noise_publish.ANCHOR_EVERY` plays up to
30,000 (12 refreshes), seeds 0-9: the worlds of ``tests/learners/test_noise_anchor_check.py``
(``graded`` 0.2/0.45/0.7, ``best_half`` 0.5/0.35/0.2/0.05, ``context_graded``) and the
one-right-label world.  After each refresh a model *shows published rates* when the rates
in use are a published estimate: *before* (published once, kept whatever later refreshes
say) and *after* withdrawal (:func:`~app.learners.noise_publish.shows_published`: a refusal
for ``anchor_not_flat`` or ``anchor_unchecked`` withdraws it until the next publication).
Per world: the refreshes published, the refreshes showing published rates before and
after, out of 120, and for the one-right world the refreshes whose shown rates are within
0.05 of the truth.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_noise_withdraw.py   # about 10 CPU seconds

Writes ``bench/results/noise-withdraw.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from app.bench.machine import machine_info
from app.learners.noise_publish import ANCHOR_EVERY, anchor_estimate, outcome, shows_published
from app.sim.relevance import best_half, context_graded, graded, label_plays, one_right

RESULTS = Path(__file__).resolve().parent / "results"
RATES = (0.1, 0.2)
PLAYS = 30_000
SEEDS = range(10)
WORLDS = {"graded": graded, "best_half": best_half, "context_graded": context_graded,
          "one_right": one_right}


def outcomes(world_name: str, seed: int) -> list[dict[str, Any]]:
    """The outcome of every refresh of one seeded stream."""
    world = WORLDS[world_name]()
    plays = label_plays(world, PLAYS, RATES, seed)
    return [outcome(anchor_estimate(plays.prob[:t], plays.score[:t], plays.click[:t],
                                    world.n_classes, {}, one_right_label=True))
            for t in range(ANCHOR_EVERY, PLAYS + 1, ANCHOR_EVERY)]


def summary(runs: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """Counts over the seeds' refreshes (module docstring)."""
    published = before = after = within = 0
    for outs in runs.values():
        kept: dict[str, Any] | None = None
        for out, shown in zip(outs, shows_published(outs), strict=True):
            published += out["status"] == "published"
            kept = out if out["status"] == "published" else kept
            before += kept is not None
            after += shown
            if shown and kept is not None and all(
                    abs(kept[k] - truth) <= 0.05 for k, truth in zip(("rho0", "rho1"), RATES,
                                                                     strict=True)):
                within += 1
    total = sum(len(outs) for outs in runs.values())
    return {"refreshes": total, "published": published, "shown_before": before,
            "shown_after": after, "shown_after_within_0_05": within}


def main() -> None:
    started = time.process_time()
    out: dict[str, Any] = {"machine": machine_info(), "rates": RATES, "plays": PLAYS,
                           "every": ANCHOR_EVERY, "seeds": list(SEEDS), "worlds": {}}
    for name in WORLDS:
        runs = {seed: outcomes(name, seed) for seed in SEEDS}
        out["worlds"][name] = {**summary(runs),
                               "reasons": {seed: [o["reason"] or o["status"] for o in outs]
                                           for seed, outs in runs.items()}}
        print(name, {k: v for k, v in out["worlds"][name].items() if k != "reasons"},
              flush=True)
    out["cpu_seconds"] = round(time.process_time() - started, 1)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "noise-withdraw.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
