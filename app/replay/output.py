"""What every replay writes: repeats averaged, the JSON summary, the progress bar, the plot.

A replay of ``--repeats k`` runs the task runner with seeds ``seed ..
seed + k - 1`` and summarises them in a :class:`Summary`: the mean curve with
its standard deviation over runs, the mean final value, per-run details.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.replay.actions_plot import add_actions_panel, reports_actions
from app.replay.noise_plot import add_estimates_panel, published
from app.replay.result import ReplayResult

Runner = Callable[[int, Callable[[int], None]], ReplayResult]
"""One run for a seed, reporting progress in rounds: ``runner(seed, progress)``."""


@dataclass
class Summary:
    """Runs of one replay configuration over consecutive seeds.

    ``t``, ``mean`` and ``std`` are the curve's rounds, its mean over runs
    and the (population) standard deviation over runs at each point.
    """

    algorithm: str
    dataset: str
    rounds: int
    metric: str
    seeds: list[int]
    t: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    final: float
    final_std: float
    runs: list[ReplayResult] = field(repr=False)
    task: str | None = None
    seconds: float = math.nan
    cpu_seconds: float = math.nan

    @property
    def label(self) -> str:
        """Curve label for plots."""
        return self.algorithm


def summarise(results: Sequence[ReplayResult], task: str | None = None,
              seconds: float = math.nan, cpu_seconds: float = math.nan) -> Summary:
    """Average runs of the same configuration (their curves share the same rounds)."""
    if not results:
        raise ValueError("no runs to summarise")
    first = results[0]
    t = np.array([p[0] for p in first.curve])
    for r in results[1:]:
        if [p[0] for p in r.curve] != t.tolist():
            raise ValueError("runs have different curve points; cannot average them")
    values = np.array([[p[1] for p in r.curve] for r in results])
    finals = np.array([r.final for r in results])
    return Summary(
        algorithm=first.algorithm, dataset=first.dataset, rounds=first.rounds,
        metric=first.metric, seeds=[r.seed for r in results], t=t,
        mean=values.mean(axis=0), std=values.std(axis=0),
        final=float(finals.mean()), final_std=float(finals.std()),
        runs=list(results), task=task, seconds=seconds, cpu_seconds=cpu_seconds,
    )


def _json_safe(value: Any) -> Any:
    """numpy scalars/arrays to Python, NaN/inf to None (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_json_dict(summary: Summary) -> dict[str, Any]:
    """The replay JSON (api.md, "Command line").

    Always ``algorithm``, ``dataset``, ``rounds``, ``final_<metric>`` (mean
    over runs) and ``curve`` ``[[t, mean], ...]``; then ``final_<metric>_std``,
    ``curve_std``, ``task``, ``metric``, ``repeats``, ``seeds``, ``params``,
    ``seconds``, ``cpu_seconds`` and ``runs`` (per run: seed, final value, its ``extra``).
    The ``extra`` fields of the runs are lifted to the top level: numbers
    that differ between runs as their mean, anything else (settings,
    ``noise_estimates``, ...) from the first run.
    """
    key = f"final_{summary.metric}"
    out: dict[str, Any] = {
        "algorithm": summary.algorithm,
        "dataset": summary.dataset,
        "task": summary.task,
        "rounds": summary.rounds,
        "metric": summary.metric,
        key: summary.final,
        f"{key}_std": summary.final_std,
        "curve": [[int(t), float(v)] for t, v in zip(summary.t, summary.mean, strict=True)],
        "curve_std": [[int(t), float(v)] for t, v in zip(summary.t, summary.std, strict=True)],
        "repeats": len(summary.runs),
        "seeds": summary.seeds,
        "params": summary.runs[0].params,
        "seconds": summary.seconds,
        "cpu_seconds": summary.cpu_seconds,
    }
    for name, value in summary.runs[0].extra.items():
        if name in out:
            continue
        values = [r.extra.get(name) for r in summary.runs]
        numbers = all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                      for v in values)
        differ = numbers and len(set(values)) > 1
        out[name] = float(np.mean(np.asarray(values, dtype=np.float64))) if differ else value
    out["runs"] = [{"seed": r.seed, key: r.final, "extra": r.extra} for r in summary.runs]
    return dict(_json_safe(out))


def from_json_dict(record: dict[str, Any]) -> Summary:
    """The :class:`Summary` that :func:`to_json_dict` wrote ``record`` from, as far as
    the JSON holds it: the mean curve and its band, the finals, and each run's
    seed, final value and ``extra`` (its runs carry no curves of their own)."""
    key = f"final_{record['metric']}"

    def nan(value: Any) -> float:
        return math.nan if value is None else float(value)

    runs = [ReplayResult(algorithm=record["algorithm"], dataset=record["dataset"],
                         rounds=record["rounds"], metric=record["metric"], final=nan(r[key]),
                         curve=[], seed=r["seed"], params=record["params"], extra=r["extra"])
            for r in record["runs"]]
    return Summary(
        algorithm=record["algorithm"], dataset=record["dataset"], rounds=record["rounds"],
        metric=record["metric"], seeds=record["seeds"],
        t=np.array([t for t, _ in record["curve"]]),
        mean=np.array([nan(v) for _, v in record["curve"]]),
        std=np.array([nan(v) for _, v in record["curve_std"]]),
        final=nan(record[key]), final_std=nan(record[f"{key}_std"]), runs=runs,
        task=record["task"], seconds=nan(record["seconds"]),
        cpu_seconds=nan(record["cpu_seconds"]))


def write_json(summary: Summary, path: str | Path) -> None:
    """Write :func:`to_json_dict` to ``path`` (parent directories created)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(to_json_dict(summary), separators=(",", ":"), allow_nan=False)
                 + "\n")


METRIC_LABELS = {"error_rate": "online error rate (greedy vs true label)",
                 "mse": "running mean squared error",
                 "kept_reward": "mean reward of the kept events (log replay)",
                 "gap_closed": "gap closed, last 1,000 rounds:\n"
                               "(played - random) / (oracle - random)",
                 "price_gap_closed": "gap closed by the prices played so far:\n"
                                     "(played - uniform) / (best - uniform)",
                 "action_gap_closed": "gap closed by the actions played so far:\n"
                                      "(played - uniform) / (best - uniform)"}
#: What a metric means, printed under a replay's summary line (the plot's axis names it).
METRIC_NOTES = {
    "gap_closed": "gap_closed: the share of the gap between a random ranking and the oracle "
                  "(the true best) that the played rankings close, relevance weighted by the "
                  "true position bias: sum(played - random) / sum(oracle - random); 1 = the "
                  "oracle, 0 = no better than random (the curve: over the last 1,000 rounds "
                  "at each point)",
    "price_gap_closed": "price_gap_closed: the share of the gap between a uniform price and "
                        "each customer's best price that the prices played close (exploration "
                        "included): sum(played - uniform) / sum(best - uniform) over the "
                        "rounds so far; 1 = the best prices, 0 = no better than uniform",
    "action_gap_closed": "action_gap_closed: the share of the gap between a uniform action and "
                         "each context's best action that the actions played close "
                         "(exploration included), in expected reward: sum(played - uniform) / "
                         "sum(best - uniform) over the rounds so far; 1 = the best actions, "
                         "0 = no better than uniform"}
#: Metrics drawn on a linear y axis whatever is asked: a share or a reward, not a loss that
#: falls towards 0 over decades (a share of a gap can be negative early on).
LINEAR_METRICS = frozenset({"gap_closed", "kept_reward", "price_gap_closed",
                            "action_gap_closed"})
#: How a run's noise shows in a plot's title: its ``extra`` field, the text.
NOISE_LABELS = {"noisy_label_rate": "label noise rate {:.3g}", "input_noise": "input noise sd {:g}",
                "noise_variance_max": "label noise variance <= {:g}"}
#: The learners' step sizes (and the exploration rate gamma) shown in a plot's title.
STEP_LABELS = {"gamma": "γ = {:g}", "eta": "η = {:g}"}


def settings(summary: Summary) -> str:
    """The noise rates and step sizes of ``summary``'s runs, as a plot's title gives them."""
    extra, params = summary.runs[0].extra, summary.runs[0].params
    parts = []
    if "rho0" in extra:
        parts.append(f"ρ0 = {extra['rho0']:g}, ρ1 = {extra['rho1']:g}")
    parts += [text.format(extra[name]) for name, text in NOISE_LABELS.items()
              if isinstance(extra.get(name), (int, float))]
    parts += [text.format(params[name]) for name, text in STEP_LABELS.items()
              if isinstance(params.get(name), (int, float))]
    return ", ".join(parts)


def default_title(summaries: Sequence[Summary]) -> str:
    """Data set and curves on the first line; noise rates and step sizes on the second (once
    when every curve shares them, else per curve)."""
    first, repeats = summaries[0], len(summaries[0].runs)
    title = f"{first.dataset}: " + ", ".join(s.label for s in summaries) + (
        f" (mean of {repeats} runs, band = ±1 sd)" if repeats > 1 else "")
    each = {s.label: settings(s) for s in summaries}
    shared = set(each.values())
    line = (shared.pop() if len(shared) == 1
            else "; ".join(f"{label}: {text}" for label, text in each.items() if text))
    return f"{title}\n{line}" if line else title


def plot(summaries: Sequence[Summary], path: str | Path, title: str | None = None,
         logx: bool = True, logy: bool = True) -> None:
    """PNG of :func:`figure`."""
    import matplotlib.pyplot as plt

    fig = figure(summaries, title, logx=logx, logy=logy)
    try:
        save_figure(fig, path)
    finally:
        plt.close(fig)


def save_panels(panels: Sequence[tuple[str, Sequence[Summary]]], path: str | Path,
                columns: int, title: str | None = None,
                panel_size: tuple[float, float] = (4.6, 3.0)) -> None:
    """PNG of :func:`panels_figure` (log-log panels)."""
    import matplotlib.pyplot as plt

    fig = panels_figure(panels, columns, title, panel_size)
    try:
        save_figure(fig, path)
    finally:
        plt.close(fig)


def figure(summaries: Sequence[Summary], title: str | None = None, logx: bool = True,
           logy: bool = True) -> Any:
    """A matplotlib figure of one :func:`draw` panel, titled by default with
    :func:`default_title`.

    Log-log axes by default, as in the papers' figures.  Uses matplotlib's
    Agg backend (no display needed); the caller closes the figure.
    """
    fig = panels_figure([(default_title(summaries) if title is None else title, summaries)],
                        columns=1, panel_size=(6.4, 4.4), logx=logx, logy=logy)
    estimated = [s for s in summaries if published(s.runs[0])]
    acting = [s for s in summaries if reports_actions(s.runs[0])]
    if estimated:  # a second panel: the published noise estimates with their intervals
        add_estimates_panel(fig, estimated[0].runs)
    elif acting:  # a second panel: the learned action against the best per context
        add_actions_panel(fig, acting[0].runs)
    return fig


def panels_figure(panels: Sequence[tuple[str, Sequence[Summary]]], columns: int,
                  title: str | None = None, panel_size: tuple[float, float] = (4.6, 3.0),
                  logx: bool = True, logy: bool = True) -> Any:
    """A matplotlib figure of one :func:`draw` panel per ``(panel title, summaries)``,
    ``columns`` to a row (filled row by row) under ``title``.

    With more than one panel the axes are named once for the whole figure (the
    first panel's metric).  Uses matplotlib's Agg backend; the caller closes the figure.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, squeeze=False, layout="constrained",
                             figsize=(panel_size[0] * columns, panel_size[1] * rows))
    try:
        for ax, (panel_title, summaries) in zip(axes.flat, panels, strict=False):
            draw(ax, summaries, panel_title, logx=logx, logy=logy)
        for ax in axes.flat[len(panels):]:
            ax.set_visible(False)
        if len(panels) > 1:
            fig.supxlabel(axes[0, 0].get_xlabel(), fontsize=10)
            fig.supylabel(axes[0, 0].get_ylabel(), fontsize=10)
            for ax in axes.flat:
                ax.set(xlabel="", ylabel="")
        if title:
            fig.suptitle(title, fontsize=10)
    except BaseException:
        plt.close(fig)
        raise
    return fig


def final_text(summary: Summary) -> str:
    """A curve's final value for its legend, with the rounds it is the mean over when the
    runs say (``final_rounds``)."""
    rounds = summary.runs[0].extra.get("final_rounds")
    return (f"{summary.final:.3g}" if rounds is None
            else f"final {summary.final:.3g}, last {rounds:,} rounds")


def draw(ax: Any, summaries: Sequence[Summary], title: str, logx: bool = True,
         logy: bool = True) -> None:
    """Each summary's mean curve against rounds on the matplotlib axes ``ax``, with a +-1 std
    band over runs, a dotted line at the chance level of a classification task (its runs'
    ``chance_error_rate``) and a legend giving each curve's final value.

    The y axis is logarithmic when ``logy`` is asked, the metric is not in
    :data:`LINEAR_METRICS` and every mean is positive; there, a band stops at
    the lowest positive value a run took (a band below zero has no place on it).
    """
    logy = (logy and summaries[0].metric not in LINEAR_METRICS
            and all(np.all(s.mean > 0) for s in summaries))
    for s in summaries:
        (line,) = ax.plot(s.t, s.mean, label=f"{s.label} ({final_text(s)})")
        if len(s.runs) > 1:
            low = s.mean - s.std
            if logy:
                values = np.array([v for r in s.runs for _, v in r.curve], dtype=float)
                low = np.maximum(low, values[values > 0].min())
            ax.fill_between(s.t, low, s.mean + s.std, color=line.get_color(), alpha=0.2)
    for chance in sorted({s.runs[0].extra["chance_error_rate"] for s in summaries
                          if "chance_error_rate" in s.runs[0].extra}):
        ax.axhline(chance, color="grey", linestyle=":", linewidth=1,
                   label=f"chance (1 - 1/K = {chance:.3g})")
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("rounds")
    ax.set_ylabel(METRIC_LABELS.get(summaries[0].metric, summaries[0].metric))
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


#: Colours of a saved figure: line plots need few, and a palette PNG is about a
#: quarter of the size of matplotlib's RGBA one (the docs keep many figures).
FIGURE_COLOURS = 32
#: Resolution of a saved figure: labels stay legible, and the docs' figures
#: take about two thirds of the bytes they take at 110 dpi.
FIGURE_DPI = 80
#: oxipng's effort: level 4 gains a few percent over its default (2) on the docs'
#: figures at a few seconds for the largest.
OXIPNG_LEVEL = 4


def save_figure(fig: Any, path: str | Path, dpi: int = FIGURE_DPI) -> None:
    """Save a matplotlib figure as a palette PNG of :data:`FIGURE_COLOURS` colours.

    The palette comes from a fast octree: it keeps every line's own colour, where a
    median cut merges a colour few pixels carry (a line under two others) into a
    neighbouring one.  oxipng then re-encodes the file losslessly (it picks the row
    filters and the palette order), about 10% fewer bytes than Pillow's own encoder.
    """
    import io

    import oxipng
    from PIL import Image

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    buffer.seek(0)
    image = Image.open(buffer).convert("RGB").quantize(
        colors=FIGURE_COLOURS, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    p.write_bytes(oxipng.optimize_from_memory(buffer.getvalue(), level=OXIPNG_LEVEL))


@contextmanager
def progress_bar(total: int | None, desc: str, enabled: bool | None = None,
                 unit: str = "round") -> Iterator[Callable[[int], None]]:
    """A tqdm bar on stderr counting ``unit`` s; yields ``advance(n)``.

    ``enabled=None`` shows it only when stderr is a terminal; without tqdm (the ``lab``
    extra) there is no bar.
    """
    try:
        from tqdm import tqdm
    except ModuleNotFoundError:
        yield lambda n: None
        return
    show = sys.stderr.isatty() if enabled is None else enabled
    bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=True, disable=not show,
               file=sys.stderr, dynamic_ncols=True)
    try:
        yield bar.update
    finally:
        bar.close()


def run_repeats(runner: Runner, seed: int, repeats: int, advance: Callable[[int], None]
                ) -> list[ReplayResult]:
    """Run ``runner`` for seeds ``seed .. seed + repeats - 1`` (one after another)."""
    return [runner(s, advance) for s in range(seed, seed + repeats)]
