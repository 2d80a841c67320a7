"""Kernel OGD from noisy copies (paper P5): the numbers and plots of docs/results/kernels.md.

Runs the ``noisy_input`` replay runner (the same code path as
``noisyloop replay``) on:

A. linear-gaussian, linear kernel, squared loss, input noise std 1.0:
   unbiased two-copy learner vs naive single copy, over P5's eta;
B. friedman1 (noise 0.1): every kernel, naive vs unbiased (fixed and random
   gradient order), copies used vs P5's expected query counts, and the
   Gaussian kernel with the eta/sqrt(t) schedule;
C. the support budget (no explicit levels vs exact low levels);
D. moons / circles with the smoothed hinge.

Usage: ``.venv/bin/python bench/results_kernels.py [--quick] [--out docs/results]
[--data bench/results]`` (writes ``<data>/kernels.json`` and plots under ``<out>/img/``;
prints a markdown table); ``--replot`` redraws the plots and tables from
``<data>/kernels.json`` without running anything.
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

from app.replay import noisy_input
from app.replay.output import save_figure
from app.replay.result import ReplayResult


def replay(dataset: str, rounds: int, seed: int = 0, **options: Any) -> tuple[ReplayResult, float]:
    """One replay with the runner's defaults overridden by ``options``."""
    parser = argparse.ArgumentParser()
    noisy_input.add_arguments(parser.add_argument_group())
    args = parser.parse_args([])
    for key, value in options.items():
        setattr(args, key, value)
    args.dataset, args.rounds, args.algorithm = dataset, rounds, None
    start = time.perf_counter()
    result = noisy_input.run(args, seed, lambda n: None)
    return result, time.perf_counter() - start


def row(name: str, result: ReplayResult, seconds: float) -> dict[str, Any]:
    metric = result.metric
    return {"run": name, "final": result.final,
            "first_window": result.extra[f"first_window_{metric}"],
            "final_window": result.extra[f"final_window_{metric}"],
            "window_ratio": result.extra["window_ratio"],
            "copies_per_round": result.extra["copies_per_round"],
            "queries_per_round": result.extra["queries_per_round"],
            "expected_queries": result.extra["expected_queries"],
            "paper_expected_queries": result.extra["paper_expected_queries"],
            "support_terms": result.extra["support_terms"], "seconds": seconds,
            "curve": result.curve}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short streams (smoke run)")
    parser.add_argument("--out", default="docs/results", help="directory of the plots (img/)")
    parser.add_argument("--data", type=Path, default=Path("bench/results"),
                        help="directory of kernels.json, the raw rows")
    parser.add_argument("--replot", action="store_true",
                        help="redraw the plots and tables from <data>/kernels.json, run nothing")
    opts = parser.parse_args()
    scale = 0.2 if opts.quick else 1.0
    out = Path(opts.out)
    (out / "img").mkdir(parents=True, exist_ok=True)
    if opts.replot:
        saved = json.loads((opts.data / "kernels.json").read_text())
        plot(saved["rows"], out / "img")
        print_tables(saved["rows"])
        return
    rows: dict[str, list[dict[str, Any]]] = {"A": [], "B": [], "C": [], "D": []}

    # A: step-size trade-off, linear kernel, squared loss, noise 1.0.
    t_lin = int(5000 * scale)
    for eta in (0.05, 0.1, 0.2, 0.5, 1.0, 2.0):
        for naive in (False, True):
            res, sec = replay("linear-gaussian", t_lin, kernel="linear", input_noise=1.0,
                              eta=eta, naive=naive)
            rows["A"].append({**row(f"eta={eta} {'naive' if naive else 'two-copy'}", res, sec),
                              "eta": eta, "naive": naive})

    # B: kernels on friedman1, noise 0.1.
    t_fr = int(3000 * scale)
    for kernel in ("linear", "poly:2", "exp", "gaussian:5"):
        variants: list[tuple[str, dict[str, Any]]] = [("naive", {"naive": True}),
                                                      ("unbiased fixed C", {})]
        variants.append(("unbiased random C (P5)", {"gradient_order": "random"}))
        if kernel == "gaussian:5":
            variants.append(("unbiased, eta/sqrt(t)", {"schedule": "sqrt_t"}))
        for label, extra in variants:
            res, sec = replay("friedman1", t_fr, kernel=kernel, **extra)
            rows["B"].append({**row(f"{kernel} {label}", res, sec), "kernel": kernel})

    # C: support budget (Gaussian, friedman1).
    for explicit_dim, budget in ((0, 100), (0, 300), (0, 1000), (0, 3000), (4096, 100),
                                 (4096, 1000)):
        res, sec = replay("friedman1", t_fr, explicit_dim=explicit_dim, support_budget=budget)
        rows["C"].append({**row(f"explicit_dim={explicit_dim} budget={budget}", res, sec),
                          "explicit_dim": explicit_dim, "budget": budget})

    # D: classification.
    for dataset in ("moons", "circles"):
        for label, extra in (("naive", {"naive": True}), ("unbiased", {})):
            res, sec = replay(dataset, t_fr, kernel="gaussian:1", input_noise=0.1, **extra)
            rows["D"].append(row(f"{dataset} {label}", res, sec))

    opts.data.mkdir(parents=True, exist_ok=True)
    (opts.data / "kernels.json").write_text(json.dumps(
        {"quick": opts.quick, "rows": rows}, indent=1))
    plot(rows, out / "img")
    print_tables(rows)


def print_tables(rows: dict[str, list[dict[str, Any]]]) -> None:
    """One Markdown table per part (A-D) of the rows."""
    for part, part_rows in rows.items():
        print(f"\n### {part}\n")
        print("| run | final (running) | first 10% | last 10% | last/first | copies/round "
              "| queries/round | expected | P5 expected | terms | s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in part_rows:
            print(f"| {r['run']} | {r['final']:.3f} | {r['first_window']:.3f} "
                  f"| {r['final_window']:.3f} | {r['window_ratio']:.2f} "
                  f"| {r['copies_per_round']:.2f} | {r['queries_per_round']:.2f} "
                  f"| {r['expected_queries']:.2f} | {r['paper_expected_queries']:.2f} "
                  f"| {r['support_terms']} | {r['seconds']:.1f} |")


def plot(rows: dict[str, list[dict[str, Any]]], img: Path) -> None:
    """Step-size trade-off (A) and learning curves (A at eta=0.1, B Gaussian)."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for naive, label in ((False, "unbiased two-copy"), (True, "naive single copy")):
        pts = [(r["eta"], r["final_window"]) for r in rows["A"] if r["naive"] == naive]
        ax.plot(*zip(*pts, strict=True), marker="o", label=label)
    ax.set(xscale="log", yscale="log", xlabel="P5 eta (step eta/sqrt(T))",
           ylabel="MSE, last 10% of rounds", title="linear kernel, input noise 1.0")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, img / "kernels_eta_tradeoff.png")
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for r in rows["A"]:
        if r["eta"] == 0.1:
            axes[0].plot(*zip(*r["curve"], strict=True), label=r["run"])
    axes[0].set(xlabel="round", ylabel="running MSE (clean)", title="linear-gaussian")
    for r in rows["B"]:
        if r["kernel"] == "gaussian:5":
            axes[1].plot(*zip(*r["curve"], strict=True), label=r["run"])
    axes[1].set(xlabel="round", ylabel="running MSE (clean)", title="friedman1, noise 0.1")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, img / "kernels_curves.png")
    plt.close(fig)


if __name__ == "__main__":
    main()
