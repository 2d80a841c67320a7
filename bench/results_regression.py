"""ORS and label budgets on the paper's settings: writes docs/results/regression.md.

Every number comes from :func:`app.replay.regression.run` (the code path of
``noisyloop replay``), averaged over seeds ``1..reps``; tuning (``β`` of
rule (6), ``a`` of the ``auto`` budget strategy, ``r`` in the tuned-``r``
table) uses seed 0 only, like the paper's "tuned using a single random
sequence".  Metric: mean squared error of the prediction against the clean
target, cumulative over the run ("MSE") and over its last 10% ("end MSE").

Usage::

    .venv/bin/python bench/results_regression.py --quick   # minutes: shorter runs, 2 seeds
    .venv/bin/python bench/results_regression.py           # the docs: 50k / 10k rounds

Writes ``<out>/regression.md``, ``<data>/regression.json`` and plots in
``<out>/img/regression_*.png``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from app.bench.machine import machine_info
from app.learners.ors import DEFAULT_R
from app.replay import regression
from app.replay.output import save_figure
from app.replay.result import ReplayResult

#: Variant name -> (algorithm, replay options); the paper's §4.1 variants.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "clean feedback": ("nlms", {"noise_variance_max": 0.0}),
    "noisy feedback": ("nlms", {}),
    "beta": ("ors", {"alpha_rule": "beta"}),
    "one sample": ("ors", {"alpha_rule": "one_sample"}),
    "one sample and pred": ("ors", {"alpha_rule": "pred"}),
    "two samples": ("ors", {"alpha_rule": "two_sample", "k_variance": "sample",
                            "budget": 2.0, "budget_strategy": "const"}),
}
KNOWN = ("clean feedback", "noisy feedback", "beta", "one sample", "one sample and pred",
         "two samples")
UNKNOWN = ("clean feedback", "noisy feedback", "one sample and pred", "two samples")
BETA_GRID = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
R_GRID = (10.0, 30.0, 100.0, 300.0, 1000.0)
A_GRID = (0.25, 1.0, 4.0, 16.0, 64.0, 256.0)
BUDGETS = (1.5, 2.0, 3.0)
SCHEDULES = ("uniform", "increasing", "decreasing")
STRATEGIES = ("const", "begin", "auto", "auto_self_tuned")
R_DEPENDENCE = (1.0, 3.0, 10.0, 30.0, 100.0)


def replay(dataset: str, algorithm: str, rounds: int, seed: int, **options: Any) -> ReplayResult:
    """One in-process replay with the runner's defaults overridden by ``options``."""
    parser = argparse.ArgumentParser()
    regression.add_arguments(parser.add_argument_group("regression"))
    args = parser.parse_args([])
    args.dataset, args.algorithm, args.rounds = dataset, algorithm, rounds
    for name, value in options.items():
        setattr(args, name, value)
    return regression.run(args, seed, lambda n: None)


def averaged(seeds: range, dataset: str, algorithm: str, rounds: int, **options: Any
             ) -> dict[str, Any]:
    """Mean MSE, end MSE, labels per round and mean curve over ``seeds``."""
    runs = [replay(dataset, algorithm, rounds, s, **options) for s in seeds]
    curve = np.mean([[v for _, v in r.curve] for r in runs], axis=0)
    return {
        "mse": float(np.mean([r.final for r in runs])),
        "mse_se": float(np.std([r.final for r in runs], ddof=1) / np.sqrt(len(runs)))
        if len(runs) > 1 else 0.0,
        "end_mse": float(np.mean([r.extra["final_window_mse"] for r in runs])),
        "labels_per_round": float(np.mean([r.extra["labels_per_round"] for r in runs])),
        "curve_t": [t for t, _ in runs[0].curve],
        "curve": curve.tolist(),
        "trace": runs[0].extra.get("budget_trace", []),
    }


def tune(values: tuple[float, ...], score: Any) -> float:
    """The value of ``values`` with the lowest ``score(value)``."""
    return min(values, key=score)


def single_label(dataset: str, M: float, rounds: int, reps: range, r: float
                 ) -> dict[str, dict[str, Any]]:
    """Figure 2 / Figure 4 variants at one noise level, known and unknown variance."""
    beta = tune(BETA_GRID, lambda b: replay(dataset, "ors", rounds, 0, r=r, alpha_rule="beta",
                                            beta=b, known_variance=True,
                                            noise_variance_max=M).final)
    out: dict[str, dict[str, Any]] = {}
    for known, names in ((True, KNOWN), (False, UNKNOWN)):
        for name in names:
            algorithm, opts = VARIANTS[name]
            if not known and algorithm == "nlms":
                out[f"unknown/{name}"] = out[f"known/{name}"]
                continue
            opts = {"noise_variance_max": M, "r": r, "known_variance": known, **opts}
            if name == "beta":
                opts["beta"] = beta
            res = averaged(reps, dataset, algorithm, rounds, **opts)
            res["beta"] = beta if name == "beta" else None
            out[f"{'known' if known else 'unknown'}/{name}"] = res
            print(f"  {dataset} M={M} {'known' if known else 'unknown'} {name}: "
                  f"{res['mse']:.4f}", flush=True)
    return out


def tuned_r(dataset: str, M: float, rounds: int, reps: range) -> dict[str, dict[str, Any]]:
    """NLMS vs ORS "one sample and pred" (unknown variance), each with its own tuned r."""
    out = {}
    for algorithm in ("nlms", "ors"):
        scores = {r: replay(dataset, algorithm, rounds, 0, r=r, noise_variance_max=M).final
                  for r in R_GRID}
        best = min(scores, key=scores.__getitem__)
        res = averaged(reps, dataset, algorithm, rounds, r=best, noise_variance_max=M)
        out[algorithm] = {"r": best, "tuning": scores, **res}
        print(f"  tuned r {dataset} M={M} {algorithm}: r={best} mse={res['mse']:.4f}", flush=True)
    return out


def tune_a(algorithm: str, rounds: int, opts: dict[str, Any]) -> float:
    """The ``a`` of :data:`A_GRID` whose ``auto`` run on seed 0 spends closest to B."""
    def miss(a: float) -> float:
        res = replay("linear-gaussian", algorithm, rounds, 0, budget_a=a, **opts)
        return abs(float(opts["budget"]) - res.extra["labels_per_round"])
    return tune(A_GRID, miss)


def budget_runs(rounds: int, reps: range, r: float) -> dict[str, dict[str, Any]]:
    """Figure 6: strategies x budgets x schedules, with (ors) and without (nlms) scaling."""
    out: dict[str, dict[str, Any]] = {}
    for schedule in SCHEDULES:
        for algorithm in ("ors", "nlms"):
            base = {"noise_variance_max": 5.0, "noise_schedule": schedule, "r": r}
            out[f"{schedule}/{algorithm}/1/none"] = averaged(reps, "linear-gaussian", algorithm,
                                                             rounds, budget=1.0, **base)
            for B in BUDGETS:
                for strategy in STRATEGIES:
                    opts = {**base, "budget": B, "budget_strategy": strategy}
                    if strategy == "auto":
                        opts["budget_a"] = tune_a(algorithm, rounds, opts)
                    res = averaged(reps, "linear-gaussian", algorithm, rounds, **opts)
                    res["a"] = opts.get("budget_a")
                    out[f"{schedule}/{algorithm}/{B:g}/{strategy}"] = res
            print(f"  budget {schedule} {algorithm} done", flush=True)
    return out


def r_dependence(rounds: int, reps: range) -> dict[str, dict[str, Any]]:
    """Budget 2 vs 1 (auto_self_tuned) on linear-gaussian M=5 as a function of r."""
    learners = {"ors k_variance=sample": ("ors", {"k_variance": "sample"}),
                "ors k_variance=pred": ("ors", {"k_variance": "pred"}),
                "nlms (no scaling)": ("nlms", {})}
    out = {}
    for r in R_DEPENDENCE:
        for name, (algorithm, opts) in learners.items():
            for B in (1.0, 2.0):
                out[f"{r:g}/{name}/{B:g}"] = averaged(
                    reps, "linear-gaussian", algorithm, rounds, r=r, budget=B,
                    budget_strategy="auto_self_tuned", noise_variance_max=5.0, **opts)
        print(f"  r dependence r={r:g} done", flush=True)
    return out


def plot_variants(results: dict[str, dict[str, Any]], panels: list[tuple[str, str, str]],
                  path: Path, columns: int | None = None) -> None:
    """One panel per (title, results-key, key prefix) with one curve per variant, ``columns``
    panels to a row (default: all in one row); a variant has the same colour in every panel."""
    columns = columns or len(panels)
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.8 * rows), squeeze=False)
    for ax, (title, group, prefix) in zip(axes.flat, panels, strict=True):
        for key, res in results[group].items():
            if key.startswith(prefix):
                variant = key.split("/", 1)[1]
                ax.plot(res["curve_t"], res["curve"], label=variant,
                        color=f"C{KNOWN.index(variant)}")
        ax.set(title=title, xlabel="round", ylabel="cumulative MSE", yscale="log")
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def plot_budget(budget: dict[str, dict[str, Any]], B: float, path: Path) -> None:
    """Figure 6 (final MSE against B per schedule, strategy and scaling; a strategy has
    one colour, scaling a solid and no scaling a dotted line) and figure 7 (running budget
    and a of auto_self_tuned at ``B``, uniform schedule) in one 2 x 2 grid; the first panel
    holds the legend of the three figure 6 panels."""
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.4))
    for ax, schedule in zip(axes.flat, SCHEDULES, strict=False):
        for algorithm, style in (("ors", "-"), ("nlms", ":")):
            for colour, strategy in enumerate(STRATEGIES):
                ys = [budget[f"{schedule}/{algorithm}/1/none"]["mse"]] + [
                    budget[f"{schedule}/{algorithm}/{b:g}/{strategy}"]["mse"] for b in BUDGETS]
                label = f"{strategy} ({'scaling' if algorithm == 'ors' else 'no scaling'})"
                ax.plot((1.0, *BUDGETS), ys, style, marker="o", color=f"C{colour}",
                        label=label)
        ax.set(title=f"fig6: {schedule} noise variance", xlabel="budget B", ylabel="MSE")
    axes[0, 0].legend(fontsize=7)
    trace = budget[f"uniform/ors/{B:g}/auto_self_tuned"]["trace"]
    ax = axes[1, 1]
    t = [p["t"] for p in trace]
    ax.plot(t, [p["running_budget"] for p in trace], label="running budget")
    ax.axhline(B, color="k", lw=0.8, label="B")
    ax.axhline(0.95 * B, color="k", ls="--", lw=0.8, label="0.95 B")
    ax.set(title=f"fig7: auto_self_tuned, B = {B:g}, uniform", xlabel="round",
           ylabel="labels per round")
    right = ax.twinx()
    right.plot(t, [p["a"] for p in trace], color="tab:red", lw=0.8)
    right.set(ylabel="a (red)", yscale="log")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def variant_table(results: dict[str, dict[str, Any]], Ms: tuple[float, ...], dataset: str
                  ) -> list[str]:
    """Markdown rows: variant x M, known and unknown variance."""
    head = " | ".join(f"M={M:g}" for M in Ms)
    lines = [f"| variance | variant | {head} |", "|---|---|" + "---|" * len(Ms)]
    for mode, names in (("known", KNOWN), ("unknown", UNKNOWN)):
        for name in names:
            cells = []
            for M in Ms:
                res = results[f"{dataset}/{M:g}"][f"{mode}/{name}"]
                beta = f" (β={res['beta']:g})" if res.get("beta") else ""
                cells.append(f"{res['mse']:.4f} / {res['end_mse']:.4f}{beta}")
            lines.append(f"| {mode} | {name} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs, 2 seeds")
    parser.add_argument("--out", type=Path, default=Path("docs/results"))
    parser.add_argument("--data", type=Path, default=Path("bench/results"),
                        help="directory of regression.json, the raw results")
    parser.add_argument("--from-json", action="store_true",
                        help="rewrite the page and plots from <data>/regression.json")
    args = parser.parse_args()
    (args.out / "img").mkdir(parents=True, exist_ok=True)
    if args.from_json:
        results = json.loads((args.data / "regression.json").read_text())
        write_outputs(results, args.out, bool(results["settings"].get("quick")))
        return
    long_rounds, budget_rounds, reps, budget_reps = (
        (10_000, 5_000, range(1, 3), range(1, 3)) if args.quick
        else (50_000, 10_000, range(1, 4), range(1, 6)))
    started = time.time()
    r = DEFAULT_R
    results: dict[str, Any] = {"settings": {"long_rounds": long_rounds, "budget_rounds":
                                            budget_rounds, "seeds": list(reps),
                                            "budget_seeds": list(budget_reps), "r": r,
                                            "quick": args.quick, "machine": machine_info()}}
    print("Figure 2 (linear-gaussian, M=5)", flush=True)
    results["linear-gaussian/5"] = single_label("linear-gaussian", 5.0, long_rounds, reps, r)
    print("Figure 4 (channel)", flush=True)
    for M in (0.5, 1.0, 5.0):
        results[f"channel/{M:g}"] = single_label("channel", M, long_rounds, reps, r)
    print("tuned r", flush=True)
    results["tuned_r/channel/1"] = tuned_r("channel", 1.0, long_rounds, reps)
    results["tuned_r/linear-gaussian/5"] = tuned_r("linear-gaussian", 5.0, long_rounds, reps)
    print("r dependence", flush=True)
    results["r_dependence"] = r_dependence(budget_rounds, budget_reps)
    print("Figure 6 (budgets)", flush=True)
    results["budget"] = budget_runs(budget_rounds, budget_reps, r)
    results["elapsed_s"] = time.time() - started
    args.data.mkdir(parents=True, exist_ok=True)
    (args.data / "regression.json").write_text(json.dumps(results, indent=1))
    write_outputs(results, args.out, args.quick)
    print(f"done in {results['elapsed_s']:.0f} s", flush=True)


def write_outputs(results: dict[str, Any], out: Path, quick: bool) -> None:
    """Plots and the Markdown page from the collected results."""
    img = out / "img"
    plot_variants(results, [("known variance", "linear-gaussian/5", "known/"),
                            ("unknown variance", "linear-gaussian/5", "unknown/")],
                  img / "regression_fig2.png")
    plot_variants(results, [(f"channel M={M:g}, {mode} variance", f"channel/{M:g}", f"{mode}/")
                            for mode in ("known", "unknown") for M in (0.5, 1.0, 5.0)],
                  img / "regression_fig4.png", columns=3)
    plot_budget(results["budget"], 1.5, img / "regression_fig6_7.png")
    (out / "regression.md").write_text("\n".join(report(results, quick)) + "\n")


def machine(settings: dict[str, Any]) -> str:
    """The machine of a run, from its settings (runs before they recorded it: 2 vCPUs)."""
    m = settings.get("machine")
    if m is None:
        return "a 2-vCPU x86_64 machine"
    return f"{m['cpu_model']}, {m['nproc']} CPUs, Python {m['python']}"


def report(res: dict[str, Any], quick: bool) -> list[str]:
    """The Markdown page: tables, acceptance checks and the explanations."""
    s = res["settings"]
    cmd = "bench/results_regression.py" + (" --quick" if quick else "")
    lines = [
        "# Regression with noisy labels: ORS and label budgets",
        "",
        (f"Generated by `.venv/bin/python {cmd}` ({res['elapsed_s'] / 60:.0f} min on "
        f"{machine(s)}); `--from-json` redraws this page and "
        f"its figures from `bench/results/regression.json`. Paper: Moroshko & Crammer, "
        f"*Online Regression with Controlled Label Noise Rate* (the `regression` learners of "
        f"the [algorithm reference](../algorithms.md)). "
        f"Runs use `app.replay.regression` (the code of "
        f"`noisyloop replay --dataset linear-gaussian|channel`). {s['long_rounds']:,} rounds "
        f"for single-label runs (paper: 50,000), {s['budget_rounds']:,} for budget runs "
        f"(paper: 10,000); mean over seeds {s['seeds']} ({s['budget_seeds']} for budgets; "
        f"the paper uses 20). Tuning uses seed 0. Cells: cumulative MSE over the run / MSE "
        f"of the last 10% of rounds, both against the clean target. r = {s['r']:g} for "
        f"every learner unless stated (the default; the paper does not report its r)."),
        "",
        "## Figure 2: synthetic data (d = 20, M = 5)",
        "",
        *variant_table(res, (5.0,), "linear-gaussian"),
        "",
        "![fig2](img/regression_fig2.png)",
        "",
        "## Figure 4: channel equalisation",
        "",
        *variant_table(res, (0.5, 1.0, 5.0), "channel"),
        "",
        "![fig4: known variance (top), unknown variance (bottom)](img/regression_fig4.png)",
        "",
    ]
    lines += tuned_r_section(res)
    lines += r_dependence_section(res)
    lines += budget_section(res)
    lines += acceptance_section(res)
    lines += EXPLANATIONS
    return lines


#: Why the numbers look as they do (checked against the tables above).
EXPLANATIONS = [
    "## Explanations and differences from the paper", "",
    ("- **Known variance.** As in the paper's Fig. 2, rule (6) with a tuned β is best and "
    "\"one sample and pred\" beats \"one sample\": with `ê = ỹ - ŷ` the residual "
    "estimate carries the label noise, `E ê² = e² + v`, so rule (5) over-estimates `α` "
    "exactly when the noise is large; averaging with the prediction halves that noise. "
    "β is tuned on seed 0 over a grid, so rule (6) also tunes the overall step size, "
    "which the other rules cannot."),
    ("- **Unknown variance, one label.** Variant 8 collapses to `α = r/(2r + ‖x‖²)` "
    "(its unknown-variance form): the step is exactly half the NLMS step at the same `r`, "
    "i.e. the NLMS "
    "step with regulariser `2r + ‖x‖²`. At a common `r` it is clearly better than noisy "
    "feedback (the paper's claim, reproduced), and the gain grows with `M` (Fig. 4). "
    "With `r` tuned separately for each learner (table above) NLMS closes most of the "
    "gap: without side information a single label cannot tell noisy rounds from clean "
    "ones, so the benefit of variant 8 is a better step size, not a per-example one. "
    "(`r` is tuned on cumulative MSE, which rewards fast early convergence; at the "
    "tuned `r` the end MSE of ors is lower on linear-gaussian.) The paper does not "
    "report its `r`, so we cannot tell which protocol it used."),
    ("- **Two labels and small r.** With `k_variance=sample` the k-label round uses "
    "`ê = ȳ - ŷ` and `V = s²/k`; for Gaussian noise `ȳ` and `s²` are independent, so "
    "the factor `ê²/(ê² + V)` of the step is random (for k = 2, `V` has one degree of "
    "freedom and is often near 0) and grows with the realised noise of `ȳ`: the "
    "noisiest means get the largest steps. With a small `r` the step is nearly a full "
    "NLMS step (`‖x‖²/(r + ‖x‖²) ≈ 1`) and this noise-correlated factor costs more than "
    "the halved label variance gains, so two labels lose to one label with variant 8 "
    "(whose factor is deterministic). With a large `r` steps are small, many rounds "
    "average out, and the second label helps. Without scaling the second label "
    "always helps (it only halves the label variance). The default "
    "`k_variance=\"pred\"` applies variant 8 to the k-label mean: the factor is the "
    "same deterministic `r/(2r + ‖x‖²)`, the label variance is `v/k`, so extra labels "
    "help at every `r`. The default `r = 30` (about `‖x‖²` for d = 20) gives the lowest "
    "B = 2 MSE of the r table with this estimate; for long single-label runs a larger "
    "`r` (100-300) is better on these data (tuned-r table). `r` acts as a step size in "
    "units of `‖x‖²`: rescale it with the input scale (about 1 for unit-norm inputs)."),
    ("- **Budgets.** `auto`/`auto_self_tuned` spend the extra labels where "
     "`(ỹ - ŷ)²` is large, i.e. on noisy rounds and on rounds the model gets wrong. "
     "At B = 1.5 this is the best strategy for uniform and increasing noise, while "
     "`begin` (which front-loads the budget) is best for decreasing noise and worst for "
     "increasing noise, as in the paper. Scaling beats no scaling in every cell at "
     "r = 30. At an integer B, `const` and `begin` both become \"k labels in every "
     "round\" (p = 1) and spend 100% of B, whereas `auto_self_tuned` targets 95% and "
     "`auto` with the `a` grid used here reaches only 77-83%, so at B = 2 and 3 the "
     "strategies that use more labels win; the paper's Fig. 6 does not say which B it "
     "plots. The self-tuned running budget ends near `0.95·B` and, with the hard cap, "
     "never exceeds `B·t` (Fig. 7; `tests/learners/test_budget.py`)."),
    ("- **Not reproduced.** The speech experiment (Fig. 5: data not available); the "
    "\"opt\" oracle of Fig. 2 (needs the clean label inside the learner); 20 "
    "repetitions (we use 3 and 5 to bound the run time on 2 CPUs)."),
    "",
]


def tuned_r_section(res: dict[str, Any]) -> list[str]:
    lines = ["## Each learner with its own r (unknown variance)", "",
             "| data | learner | tuned r | MSE / end MSE | tuning MSE per r (seed 0) |",
             "|---|---|---|---|---|"]
    for key, label in (("tuned_r/channel/1", "channel M=1"),
                       ("tuned_r/linear-gaussian/5", "linear-gaussian M=5")):
        for algorithm, name in (("nlms", "nlms"), ("ors", "ors pred")):
            d = res[key][algorithm]
            tuning = ", ".join(f"{float(r):g}: {v:.4f}" for r, v in d["tuning"].items())
            lines.append(f"| {label} | {name} | {d['r']:g} | {d['mse']:.4f} / "
                         f"{d['end_mse']:.4f} | {tuning} |")
    return [*lines, ""]


def r_dependence_section(res: dict[str, Any]) -> list[str]:
    d = res["r_dependence"]
    lines = ["## Budget 2 against budget 1 as a function of r", "",
             ("linear-gaussian, M = 5, `auto_self_tuned`. Cells: MSE with B = 1 / with B = 2 "
             "(labels per round used with B = 2)."), "",
             "| r | ors k_variance=sample | ors k_variance=pred | nlms (no scaling) |",
             "|---|---|---|---|"]
    for r in R_DEPENDENCE:
        cells = []
        for name in ("ors k_variance=sample", "ors k_variance=pred", "nlms (no scaling)"):
            one, two = d[f"{r:g}/{name}/1"], d[f"{r:g}/{name}/2"]
            mark = "" if two["mse"] < one["mse"] else " **(2 labels worse)**"
            cells.append(f"{one['mse']:.4f} / {two['mse']:.4f} "
                         f"({two['labels_per_round']:.2f}){mark}")
        lines.append(f"| {r:g} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def budget_section(res: dict[str, Any]) -> list[str]:
    d = res["budget"]
    lines = ["## Figure 6: spending a label budget", "",
             ("linear-gaussian, M = 5, three variance schedules. Cells: MSE (labels per round "
             "used). `auto` uses the `a` of the grid whose spending is closest to B on seed 0; "
             "all strategies use the hard cap (never above the budget)."), ""]
    for schedule in SCHEDULES:
        lines += [f"**{schedule}**", "",
                  "| learner | B | " + " | ".join(STRATEGIES) + " |",
                  "|---|---|" + "---|" * len(STRATEGIES)]
        for algorithm in ("ors", "nlms"):
            name = "ors pred (scaling)" if algorithm == "ors" else "nlms (no scaling)"
            one = d[f"{schedule}/{algorithm}/1/none"]
            lines.append(f"| {name} | 1 | " + " | ".join([f"{one['mse']:.4f}"] * 4) + " |")
            for B in BUDGETS:
                cells = [f"{d[f'{schedule}/{algorithm}/{B:g}/{s}']['mse']:.4f} "
                         f"({d[f'{schedule}/{algorithm}/{B:g}/{s}']['labels_per_round']:.2f})"
                         for s in STRATEGIES]
                lines.append(f"| {name} | {B:g} | " + " | ".join(cells) + " |")
        lines.append("")
    return [*lines, "![fig6: MSE against B per schedule; fig7: running budget and a of "
                    "auto_self_tuned, B = 1.5, uniform](img/regression_fig6_7.png)", ""]


def acceptance_section(res: dict[str, Any]) -> list[str]:
    ch = res["channel/1"]
    ors, nlms = ch["unknown/one sample and pred"], ch["unknown/noisy feedback"]
    tuned = res["tuned_r/channel/1"]
    d = res["r_dependence"]
    one, two = d["30/ors k_variance=pred/1"], d["30/ors k_variance=pred/2"]
    one_s, two_s = d["30/ors k_variance=sample/1"], d["30/ors k_variance=sample/2"]
    small = [r for r in R_DEPENDENCE if r <= 3
             and d[f"{r:g}/ors k_variance=sample/2"]["mse"]
             > d[f"{r:g}/ors k_variance=sample/1"]["mse"]]
    used = two["labels_per_round"] / 2
    return [
        "## Acceptance checks (computed by the script)", "",
        (f"- Channel, M = 1, unknown variance, common r = {res['settings']['r']:g}: ors `pred` "
        f"MSE {ors['mse']:.4f} vs nlms {nlms['mse']:.4f} (ratio {nlms['mse'] / ors['mse']:.2f}): "
        f"{'PASS' if ors['mse'] < 0.8 * nlms['mse'] else 'FAIL'}. "
        f"With r tuned per learner: ors {tuned['ors']['mse']:.4f} (r={tuned['ors']['r']:g}) vs "
        f"nlms {tuned['nlms']['mse']:.4f} (r={tuned['nlms']['r']:g})."),
        (f"- linear-gaussian, M = 5, r = 30, auto_self_tuned, default k_variance=pred: B = 2 "
        f"MSE {two['mse']:.4f} vs B = 1 {one['mse']:.4f}: "
        f"{'PASS' if two['mse'] < one['mse'] else 'FAIL'}; budget used {100 * used:.1f}% "
        f"({'PASS' if 0.92 <= used <= 1.0 else 'FAIL'}). With k_variance=sample: "
        f"{two_s['mse']:.4f} vs {one_s['mse']:.4f}."),
        (f"- Small r with the two-sample variance estimate (k_variance=sample): two labels lose "
        f"to one at r in {[float(r) for r in small]} (expected: r <= 3)."),
        "",
    ]


if __name__ == "__main__":
    main()
