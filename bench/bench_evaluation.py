"""CPU time of IPS, SNIPS and DR with bootstrap intervals over a large label log.

The goal is at most 5 s of CPU for 1,000,000 logged label events.  The log is
drawn uniformly over ``--actions`` actions with ``--features`` Gaussian
features and clicks from a logistic model; :func:`app.evaluation.estimators.evaluate`
then estimates a fixed-action target (cross-fitted ridge reward model, ``--bootstrap``
resamples, click-noise correction on).  As a reference measured in the same run,
the textbook bootstrap of one mean (``x[rng.integers(n, size=n)].mean()`` per
resample) over the same events: ``evaluate`` gives three estimators and their
intervals, the reference one interval of one mean.  Each is timed ``--repeats``
times (process CPU time); the medians are reported.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_evaluation.py \\
        --json bench/results/evaluation-speed.json
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

import numpy as np

from app.bench.machine import machine_info
from app.bench.results import write_results
from app.evaluation.estimators import LabelLog, evaluate
from app.evaluation.policies import fixed_policy

GOAL_SECONDS = 5.0


def make_log(events: int, features: int, actions: int, seed: int) -> LabelLog:
    """A uniformly logged label log with logistic clicks."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(events, features))
    a = rng.integers(0, actions, events)
    logits = np.einsum("ij,ij->i", X, rng.normal(size=(features, actions)).T[a])
    clicks = (rng.random(events) < 1.0 / (1.0 + np.exp(-logits))).astype(float)
    return LabelLog(X=X, actions=a, propensities=np.full(events, 1.0 / actions),
                    rewards=clicks, n_actions=actions,
                    logging=np.full((events, actions), 1.0 / actions))


def cpu_seconds(run: Callable[[], object]) -> float:
    """Process CPU seconds of one call."""
    start = time.process_time()
    run()
    return time.process_time() - start


def bare_bootstrap(values: np.ndarray, n_boot: int, seed: int) -> float:
    """The textbook percentile bootstrap of one mean (the reference)."""
    rng = np.random.default_rng(seed)
    n = len(values)
    means = [values[rng.integers(0, n, size=n)].mean() for _ in range(n_boot)]
    return float(np.percentile(means, 2.5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="logged events")
    parser.add_argument("--features", type=int, default=10, help="context features")
    parser.add_argument("--actions", type=int, default=5, help="actions")
    parser.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the results")
    args = parser.parse_args()

    log = make_log(args.events, args.features, args.actions, seed=0)
    target = fixed_policy(log, 2)
    ours, reference = [], []
    for repeat in range(args.repeats):
        ours.append(cpu_seconds(partial(evaluate, log, target, rho0=0.1, rho1=0.3,
                                        n_boot=args.bootstrap, seed=repeat)))
        reference.append(cpu_seconds(partial(bare_bootstrap, log.rewards, args.bootstrap,
                                             seed=repeat)))
    result = {
        "events": args.events, "features": args.features, "actions": args.actions,
        "bootstrap": args.bootstrap, "evaluate_cpu_seconds": ours,
        "reference_cpu_seconds": reference,
        "evaluate_median": statistics.median(ours),
        "reference_median": statistics.median(reference),
        "ratio_evaluate_to_reference": statistics.median(ours) / statistics.median(reference),
        "goal_seconds": GOAL_SECONDS, "machine": machine_info(),
    }
    met = "met" if result["evaluate_median"] <= GOAL_SECONDS else "NOT met"
    print(f"IPS+SNIPS+DR with {args.bootstrap} resamples over {args.events:,} events: "
          f"{result['evaluate_median']:.2f} s CPU (median of {args.repeats}; goal "
          f"{GOAL_SECONDS:g} s: {met}); textbook bootstrap of one mean: "
          f"{result['reference_median']:.2f} s; ratio {result['ratio_evaluate_to_reference']:.2f}")
    if args.json:
        write_results(args.json, result)


if __name__ == "__main__":
    main()
