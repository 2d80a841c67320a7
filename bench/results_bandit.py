"""Reproduce what the shipped data allow of the noisy-bandit (P1) and dilute-bandit (P2) papers.

Every run goes through ``noisyloop replay`` itself (the parser of
:mod:`app.cli` and :func:`app.commands.replay.replay`), so the numbers are
what a user gets from the command line.  Sections:

1. gamma sweep at (rho0, rho1) = (0.2, 0.4) for Banditron and RCNBF; the
   gamma with RCNBF's lowest final error is then used by Banditron, RCNBF and
   RCINE alike on that data set (P1 tuned gamma per algorithm and setting
   and did not report the values);
2. error-rate curves for P1's five noise settings, Banditron vs RCNBF vs
   RCINE (log-log plots, mean of the repeats with a +-1 sd band);
3. NREst's estimates in RCINE runs for P1's six settings, beside P1's
   Tables 1-2;
4. NREst's percentile sensitivity on one logged Banditron buffer;
5. MC-DBF for low / medium / high m against Perceptron, Banditron, SOBA
   (diagonal) and MC-SLP, noise-free (P2 Section 5).

Usage::

    .venv/bin/python bench/results_bandit.py --quick   # minutes: smoke run
    .venv/bin/python bench/results_bandit.py           # the docs numbers

Writes ``<out>/bandit.json`` (every summary), ``<out>/img/bandit_*.png`` and
prints the Markdown tables used in ``docs/results/bandit.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import sklearn

from app.cli import build_parser
from app.commands.replay import replay
from app.learners.noise import default_percentile, estimate_noise_rates
from app.learners.registry import build
from app.replay.output import Summary, plot, summarise, to_json_dict
from app.sim.datasets import load_classification, stream_indices
from app.sim.feedback import noisy_clicks

DATASETS = ("synsep", "digits")
CURVE_NOISE = ((0.0, 0.0), (0.15, 0.15), (0.4, 0.4), (0.2, 0.4), (0.4, 0.2))
TABLE_NOISE = ((0.0, 0.0), (0.15, 0.15), (0.25, 0.25), (0.2, 0.4), (0.4, 0.2), (0.4, 0.4))
#: P1's Algorithm 1 takes gamma in (0, 0.5).
GAMMAS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4)
PERCENTILES = (89.0, 94.0, 95.0, 97.0)
#: P2 does not report its m values; these are low / medium / high for k = 9, 10.
SET_SIZES = (2, 4, 6)
#: MC-DBF's gamma: P2 Table 1 ranges 0.12-0.5, larger for larger m.
MCDBF_GAMMA = {2: 0.15, 4: 0.2, 6: 0.3}
#: SOBA's gamma (P2 Table 1: 0.02-0.3); diagonal A (K d = 3600-640 is too big for
#: the full inverse at this speed).
SOBA_GAMMA = 0.05

#: P1 Table 2 (SynSep) and Table 1 (MNIST, USPS): rho0_hat / rho1_hat.
PAPER = {
    (0.0, 0.0): {"SynSep": (0.000, 0.003), "MNIST": (0.063, 0.029), "USPS": (0.017, 0.000)},
    (0.15, 0.15): {"SynSep": (0.177, 0.143), "MNIST": (0.172, 0.147), "USPS": (0.181, 0.153)},
    (0.25, 0.25): {"SynSep": (0.286, 0.282), "MNIST": (0.248, 0.264), "USPS": (0.258, 0.257)},
    (0.2, 0.4): {"SynSep": (0.230, 0.459), "MNIST": (0.211, 0.439), "USPS": (0.194, 0.419)},
    (0.4, 0.2): {"SynSep": (0.453, 0.268), "MNIST": (0.400, 0.260), "USPS": (0.393, 0.229)},
    (0.4, 0.4): {"SynSep": (0.416, 0.499), "MNIST": (0.403, 0.508), "USPS": (0.402, 0.515)},
}


class Bench:
    """Runs replays, keeps every summary for the JSON file."""

    def __init__(self, out: Path, rounds: dict[str, int], repeats: int, n_s: int) -> None:
        self.out, self.rounds, self.repeats, self.n_s = out, rounds, repeats, n_s
        self.parser = build_parser()
        self.records: list[dict[str, Any]] = []

    def run(self, dataset: str, algorithm: str, *, rounds: int | None = None,
            repeats: int | None = None, section: str, **options: Any) -> Summary:
        argv = ["replay", "--dataset", dataset, "--algorithm", algorithm,
                "--rounds", str(rounds or self.rounds[dataset]),
                "--repeats", str(repeats or self.repeats), "--no-progress"]
        for name, value in options.items():
            argv += [f"--{name.replace('_', '-')}", str(value)]
        args = self.parser.parse_args(argv)
        task, results, seconds, cpu = replay(args)
        summary = summarise(results, task=task, seconds=seconds, cpu_seconds=cpu)
        record = to_json_dict(summary)
        record["section"] = section
        record["argv"] = " ".join(argv)
        self.records.append(record)
        print(f"  {' '.join(argv[1:])}: {summary.final:.4f} ({seconds:.0f} s)", flush=True)
        return summary


def gamma_sweep(b: Bench, quick: bool) -> dict[str, float]:
    """Section 1: final error against gamma at (0.2, 0.4); returns gamma per data set."""
    print("\n## 1. gamma sweep at (rho0, rho1) = (0.2, 0.4)\n")
    chosen: dict[str, float] = {}
    lines = ["| data set | algorithm | " + " | ".join(f"γ={g}" for g in GAMMAS) + " |",
             "|---|---|" + "---|" * len(GAMMAS)]
    for dataset in DATASETS:
        rounds = b.rounds[dataset] // (2 if quick else 4)
        finals: dict[str, list[float]] = {}
        for alg in ("banditron", "rcnbf"):
            finals[alg] = [b.run(dataset, alg, rounds=rounds, repeats=1, section="gamma",
                                 rho0=0.2, rho1=0.4, gamma=g).final for g in GAMMAS]
            lines.append(f"| {dataset} ({rounds} rounds) | {alg} | "
                         + " | ".join(f"{v:.3f}" for v in finals[alg]) + " |")
        chosen[dataset] = GAMMAS[int(np.argmin(finals["rcnbf"]))]
    print("\n".join(lines))
    print("\nchosen gamma:", chosen)
    return chosen


def noise_curves(b: Bench, gamma: dict[str, float]) -> dict[tuple[str, float, float], Summary]:
    """Section 2 (and the RCINE runs of section 3): curves per data set and setting."""
    print("\n## 2. error rate, Banditron vs RCNBF vs RCINE: greedy (played)\n")
    rcine: dict[tuple[str, float, float], Summary] = {}
    rows = ["| data set | (ρ0, ρ1) | Banditron | RCNBF | RCINE |", "|---|---|---|---|---|"]
    for dataset in DATASETS:
        for rho0, rho1 in CURVE_NOISE:
            summaries = [
                b.run(dataset, alg, section="curves", rho0=rho0, rho1=rho1,
                      gamma=gamma[dataset], **({"n_s": b.n_s} if alg == "rcine" else {}))
                for alg in ("banditron", "rcnbf", "rcine")
            ]
            rcine[(dataset, rho0, rho1)] = summaries[2]
            name = f"bandit_{dataset}_{rho0}_{rho1}.png"
            plot(summaries, b.out / "img" / name,
                 title=f"{dataset}, ρ=({rho0}, {rho1}), γ={gamma[dataset]}, "
                       f"mean of {b.repeats} runs ±1 sd")
            played = [np.mean([r.extra["played_error_rate"] for r in s.runs]) for s in summaries]
            rows.append(f"| {dataset} | ({rho0}, {rho1}) | " + " | ".join(
                f"{s.final:.4f} ± {s.final_std:.4f} ({p:.3f})"
                for s, p in zip(summaries, played, strict=True)) + " |")
    print("\n".join(rows))
    return rcine


def nrest_table(b: Bench, gamma: dict[str, float],
                rcine: dict[tuple[str, float, float], Summary]) -> None:
    """Section 3: RCINE's estimates for P1's six settings beside P1's tables."""
    print("\n## 3. NREst estimates inside RCINE runs (ρ̂0 / ρ̂1)\n")
    rows = [("| (ρ0, ρ1) | SynSep: first | SynSep: mean of all | digits: first "
             "| digits: mean of all | P1 SynSep | P1 MNIST | P1 USPS |"),
            "|---|---|---|---|---|---|---|---|"]
    worst = {d: 0.0 for d in DATASETS}
    for rho in TABLE_NOISE:
        cells = []
        for dataset in DATASETS:
            s = rcine.get((dataset, *rho))
            if s is None:
                s = b.run(dataset, "rcine", section="nrest", rho0=rho[0], rho1=rho[1],
                          gamma=gamma[dataset], n_s=b.n_s)
            est = [e for r in s.runs for e in r.extra["noise_estimates"]]
            first = [e for r in s.runs for e in r.extra["noise_estimates"][:1]]
            f0, f1 = np.mean([e["rho0"] for e in first]), np.mean([e["rho1"] for e in first])
            m0, m1 = np.mean([e["rho0"] for e in est]), np.mean([e["rho1"] for e in est])
            worst[dataset] = max(worst[dataset], *(abs(e["rho0"] - rho[0]) for e in est),
                                 *(abs(e["rho1"] - rho[1]) for e in est))
            cells += [f"{f0:.3f} / {f1:.3f}", f"{m0:.3f} / {m1:.3f}"]
        paper = PAPER[rho]
        cells += [f"{paper[k][0]:.3f} / {paper[k][1]:.3f}" for k in ("SynSep", "MNIST", "USPS")]
        rows.append(f"| ({rho[0]}, {rho[1]}) | " + " | ".join(cells) + " |")
    print("\n".join(rows))
    print("\nlargest |estimate - truth| over all refreshes:", {
        d: round(v, 3) for d, v in worst.items()})


def logged_buffer(dataset: str, rho0: float, rho1: float, gamma: float, n: int, skip: int,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The ``(x, played, noisy click)`` records of rounds ``skip .. skip + n`` of a Banditron run.

    What RCINE's buffer holds at an intermediate point of a run (its rates
    are still 0 until the first refresh, so it plays exactly as Banditron).
    """
    X, y = load_classification(dataset, n=skip + n, seed=seed)
    k = int(y.max()) + 1
    learner = build("label", "banditron", n_features=X.shape[1], n_classes=k,
                    params={"gamma": gamma}, seed=seed)
    order = stream_indices(len(y), skip + n, np.random.default_rng([seed, 1]))
    noise = np.random.default_rng([seed, 2])
    xs, played, clicks = [], [], []
    for t, i in enumerate(order):
        ctx = learner.decide(X[i]).context
        click = float(noisy_clicks(np.array([float(ctx["played"] == y[i])]), rho0, rho1,
                                   noise)[0])
        learner.learn_one({**ctx, "click": click})
        if t >= skip:
            xs.append(ctx["x"])
            played.append(int(ctx["played"]))
            clicks.append(click)
    return np.array(xs), np.array(played), np.array(clicks), k


def percentile_sensitivity(b: Bench, gamma: dict[str, float]) -> None:
    """Section 4: NREst at several percentiles on one buffer per data set and setting.

    The buffer is rounds ``n_s .. 2 n_s`` of a Banditron run: what RCINE
    holds at its second refresh.
    """
    print("\n## 4. NREst percentile sensitivity (ρ̂0 / ρ̂1)\n")
    n = b.n_s
    rows = ["| data set | (ρ0, ρ1) | " + " | ".join(f"π={p:g}" for p in PERCENTILES)
            + " | default π |", "|---|---|" + "---|" * (len(PERCENTILES) + 1)]
    for dataset in DATASETS:
        for rho in ((0.2, 0.4), (0.4, 0.2)):
            X, played, clicks, k = logged_buffer(dataset, *rho, gamma[dataset], n, skip=n)
            cells = []
            for p in (*PERCENTILES, None):
                est = estimate_noise_rates(X, played, clicks, k, percentile=p)
                cells.append(f"{est.rho0:.3f} / {est.rho1:.3f}")
                b.records.append({"section": "percentile", "dataset": dataset, "rho": rho,
                                  "percentile": est.percentile, "rho0_hat": est.rho0,
                                  "rho1_hat": est.rho1, "buffer": n, "skip": n})
            rows.append(f"| {dataset} (K={k}, default π={default_percentile(k):.1f}) "
                        f"| {rho} | " + " | ".join(cells) + " |")
    print("\n".join(rows))


def dilute(b: Bench, gamma: dict[str, float]) -> None:
    """Section 5: MC-DBF for low/medium/high m against the baselines, noise-free."""
    print("\n## 5. MC-DBF (noise-free)\n")
    rows = ["| data set | Perceptron | Banditron | SOBA (diag) | "
            + " | ".join(f"MC-SLP m={m} | MC-DBF m={m}" for m in SET_SIZES) + " |",
            "|---|---|---|---|" + "---|---|" * len(SET_SIZES)]
    for dataset in DATASETS:
        runs = [b.run(dataset, "perceptron", section="dilute", repeats=1),
                b.run(dataset, "banditron", section="dilute", repeats=1, gamma=gamma[dataset]),
                b.run(dataset, "soba", section="dilute", repeats=1, gamma=SOBA_GAMMA,
                      params=json.dumps({"diagonal": True}))]
        for m in SET_SIZES:
            slp = b.run(dataset, "mc_slp", section="dilute", repeats=1, m=m)
            slp.runs[0].algorithm = f"mc_slp m={m}"
            dbf = b.run(dataset, "mc_dbf", section="dilute", repeats=1, m=m,
                        gamma=MCDBF_GAMMA[m])
            dbf.runs[0].algorithm = f"mc_dbf m={m}"
            slp.algorithm, dbf.algorithm = slp.runs[0].algorithm, dbf.runs[0].algorithm
            runs += [slp, dbf]
        plot(runs, b.out / "img" / f"bandit_dilute_{dataset}.png",
             title=f"{dataset}, noise-free: MC-DBF vs baselines (1 run each)")
        rows.append(f"| {dataset} | " + " | ".join(f"{s.final:.4f}" for s in runs) + " |")
    print("\n".join(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default docs/results; --quick: "
                             "/tmp/noisyloop-bandit-quick)")
    opts = parser.parse_args()
    quick = bool(opts.quick)
    out = opts.out or Path("/tmp/noisyloop-bandit-quick" if quick else "docs/results")
    rounds = {"synsep": 10_000, "digits": 10_000} if quick else {"synsep": 100_000,
                                                                  "digits": 100_000}
    b = Bench(out, rounds, repeats=1 if quick else 2, n_s=2_500 if quick else 20_000)
    start = time.perf_counter()
    print(f"machine: {platform.processor() or platform.machine()}, python "
          f"{platform.python_version()}, numpy {np.__version__}, scikit-learn "
          f"{sklearn.__version__}; rounds {rounds}, repeats {b.repeats}, n_s {b.n_s}")
    gamma = gamma_sweep(b, quick)
    rcine = noise_curves(b, gamma)
    nrest_table(b, gamma, rcine)
    percentile_sensitivity(b, gamma)
    dilute(b, gamma)
    name = "bandit.json"
    (b.out / name).write_text(json.dumps({"gamma": gamma, "records": b.records},
                                         separators=(",", ":")) + "\n")
    print(f"\ntotal {time.perf_counter() - start:.0f} s; wrote {b.out / name}")


if __name__ == "__main__":
    main()
