"""In-process learner throughput beside a plain numpy loop and Vowpal Wabbit.

Every learner of the ``label`` and ``label_set`` tasks runs on the same
stream (rows in the order of :func:`~app.sim.datasets.stream_indices`, click
noise drawn in advance for a right and a wrong play, as in
``bench/results_ridge.py``) in two modes:

* **sequential**: ``decide`` then ``learn_one`` per example, what one
  process serving and learning in a loop pays per example;
* **batch**: ``learn_many`` over columnar chunks of already-logged events
  (the events the sequential run produced), what the trainer worker pays per
  event; learners whose update commutes (``logged_only``) do one matrix
  product per chunk.

In the same run and on the same stream: a *reference numpy loop* (Banditron
with the unbiased click proxy written as the shortest numpy code: one
``W @ x``, one draw, two row updates; and its batch form ``W += C.T @ X``), and
Vowpal Wabbit's Python binding with ``--cb_explore K`` and
``--cb_explore_adf -q sa`` when ``vowpalwabbit`` imports, timed with the text
examples built beforehand (VW's own cost) and with building them in the loop
(what a Python caller pays).  Throughputs are best-of-``repeats``; ratios
compare figures of this one run.

Each figure is timed both by the wall clock and by the process's CPU time
(:func:`time.process_time`): on a shared machine the wall clock counts the
time other processes held the core, so the CPU rates (``per_cpu_second``)
are the stable ones, and the ratios and goals are computed from them
(``ratios_wall`` keeps the wall-clock ratios).  The best of ``repeats`` is
the run with the highest CPU rate.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from app.bench.machine import machine_info
from app.bench.vw import VWBandit, vw_available, vw_text
from app.learners.base import Learner, ParamError, stack_events
from app.learners.config import takes_clicks
from app.learners.registry import algorithms, build, default_params, learner_class
from app.sim.datasets import load_classification, stream_indices
from app.sim.feedback import noisy_clicks
from app.tasks import TASKS as ALL_TASKS

logger = logging.getLogger(__name__)

DATASETS = ("synsep", "digits")
#: The tasks benchmarked: classes played against a (noisy) click.
TASKS = tuple(name for name, task in ALL_TASKS.items() if task.needs_classes and task.has_clicks)
#: The learner of the reference comparison with Vowpal Wabbit.
REFERENCE = ("label", "rcnbf")
#: Click noise of the stream; learners that take rates are given these.
RHO = (0.1, 0.2)
GAMMA = 0.05
#: Chunk sizes of the batch mode (1000 is the trainer's default batch).
CHUNKS = (1000, 10_000)
#: Most logged events kept from a sequential run for the batch mode.
MAX_LOGGED = 10_000


@dataclass(frozen=True)
class Profile:
    """Sizes of one benchmark run."""

    rounds: int
    batch_events: int
    repeats: int
    time_budget: float

    @classmethod
    def of(cls, quick: bool) -> Profile:
        if quick:
            return cls(rounds=3000, batch_events=100_000, repeats=1, time_budget=3.0)
        return cls(rounds=30_000, batch_events=1_000_000, repeats=3, time_budget=4.0)


@dataclass
class Measurement:
    """Throughput of one learner in one mode on one data set (wall clock and CPU time)."""

    dataset: str
    learner: str
    mode: str
    events: int
    seconds: float
    per_second: float
    us_per_event: float
    cpu_seconds: float = 0.0
    per_cpu_second: float = 0.0
    cpu_us_per_event: float = 0.0
    note: str | None = None
    played_error: float | None = None


class Timer:
    """Wall-clock and CPU seconds since construction."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def elapsed(self) -> float:
        return time.perf_counter() - self.wall

    def both(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


@dataclass(frozen=True)
class Stream:
    """One data set replayed: rows, labels, order, and pre-drawn noisy clicks."""

    name: str
    X: np.ndarray
    y: np.ndarray
    idx: np.ndarray
    right: np.ndarray
    wrong: np.ndarray

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    @property
    def k(self) -> int:
        return int(self.y.max()) + 1

    @classmethod
    def load(cls, name: str, rounds: int, seed: int) -> Stream:
        X, y = load_classification(name, n=10_000, seed=seed)
        idx = stream_indices(len(y), rounds, np.random.default_rng(seed + 1))
        rng = np.random.default_rng(seed + 2)
        right = noisy_clicks(np.ones(rounds), *RHO, rng)
        wrong = noisy_clicks(np.zeros(rounds), *RHO, rng)
        return cls(name, X, y, idx, right, wrong)


def _measure(dataset: str, learner: str, mode: str, events: int,
             times: tuple[float, float] = (0.0, 0.0), **extra: Any) -> Measurement:
    seconds, cpu = times

    def rate(s: float) -> float:
        return events / s if s > 0 else float("inf")

    return Measurement(dataset, learner, mode, events, seconds, rate(seconds),
                       1e6 * seconds / max(events, 1), cpu, rate(cpu),
                       1e6 * cpu / max(events, 1), **extra)


def _best(runs: Sequence[Measurement]) -> Measurement:
    return max(runs, key=lambda m: m.per_cpu_second)


def build_learner(task: str, algorithm: str, stream: Stream, seed: int) -> Learner:
    """A learner with default hyper-parameters; the stream's noise rates if it takes them."""
    known = default_params(learner_class(task, algorithm))
    params: dict[str, Any] = {}
    if "rho0" in known:
        params.update(rho0=RHO[0], rho1=RHO[1])
    return build(task, algorithm, n_features=stream.d, n_classes=stream.k, params=params,
                 seed=seed)


def run_sequential(model: Learner, stream: Stream, budget: float,
                   logged: list[dict[str, Any]] | None = None
                   ) -> tuple[int, tuple[float, float], float]:
    """``decide`` + ``learn_one`` over the stream; returns (examples, (wall, CPU) s, played error).

    Stops early once ``budget`` seconds have passed (checked every 256
    examples).  Appends up to :data:`MAX_LOGGED` joined events to ``logged``.
    """
    X, y, idx, right, wrong = stream.X, stream.y, stream.idx, stream.right, stream.wrong
    label_set = model.task == "label_set"
    fb, clicks = model.feedback_fields[0], takes_clicks(model)
    errors = 0
    n = 0
    timer = Timer()
    for t, i in enumerate(idx.tolist()):
        dec = model.decide(X[i])
        ok = (y[i] in dec.output["labels"]) if label_set else dec.output["label"] == y[i]
        errors += not ok
        value = (right[t] if ok else wrong[t]) if clicks else y[i]
        event = {**dec.context, fb: value}
        model.learn_one(event)
        if logged is not None and len(logged) < MAX_LOGGED:
            logged.append(event)
        n = t + 1
        if n % 256 == 0 and timer.elapsed() > budget:
            break
    return n, timer.both(), errors / max(n, 1)


def run_batch(model: Learner, batch: dict[str, np.ndarray], chunk: int, target: int,
              budget: float) -> tuple[int, tuple[float, float]]:
    """``learn_many`` over ``chunk``-sized slices of ``batch``, cycling until ``target`` events.

    One untimed warm-up chunk first; stops early after ``budget`` seconds.
    Returns (events applied in the timed part, (wall, CPU) seconds).
    """
    n_logged = len(batch["x"])
    slices = [{k: v[s:s + chunk] for k, v in batch.items()}
              for s in range(0, n_logged, chunk)]
    model.learn_many(slices[0])
    done = 0
    timer = Timer()
    while done < target:
        for part in slices:
            model.learn_many(part)
            done += len(part["x"])
            if done >= target:
                break
        if timer.elapsed() > budget:
            break
    return done, timer.both()


def reference_sequential(stream: Stream, seed: int) -> tuple[int, tuple[float, float], float]:
    """The shortest numpy Banditron-with-proxy loop (RCNBF's update), for the ratio."""
    X, y, idx, right, wrong = stream.X, stream.y, stream.idx, stream.right, stream.wrong
    k, gamma = stream.k, GAMMA
    beta = 1.0 - RHO[0] - RHO[1]
    W = np.zeros((k, stream.d))
    rng = np.random.default_rng(seed)
    errors = 0
    timer = Timer()
    for t, i in enumerate(idx.tolist()):
        x = X[i]
        greedy = int((W @ x).argmax())
        u = rng.random()
        played = min(int(u / gamma * k), k - 1) if u < gamma else greedy
        prob = gamma / k + (1.0 - gamma) * (played == greedy)
        ok = played == y[i]
        errors += not ok
        h = ((right[t] if ok else wrong[t]) - RHO[0]) / beta
        W[played] += (h / prob) * x
        W[greedy] -= x
    return len(idx), timer.both(), errors / max(len(idx), 1)


def reference_batch(batch: dict[str, np.ndarray], k: int, chunk: int, target: int
                    ) -> tuple[int, tuple[float, float]]:
    """Batch apply written out: ``C[r, played] += h/p``, ``C[r, greedy] -= 1``, ``W += C.T X``."""
    X = batch["x"]
    n = len(X)
    W = np.zeros((k, X.shape[1]))
    beta = 1.0 - RHO[0] - RHO[1]
    done = 0
    timer = Timer()
    while done < target:
        for s in range(0, n, chunk):
            rows = np.arange(min(chunk, n - s))
            C = np.zeros((len(rows), k))
            h = (batch["click"][s:s + chunk] - RHO[0]) / beta
            np.add.at(C, (rows, batch["played"][s:s + chunk]), h / batch["prob"][s:s + chunk])
            np.add.at(C, (rows, batch["greedy"][s:s + chunk]), -1.0)
            W += C.T @ X[s:s + chunk]
            done += len(rows)
            if done >= target:
                break
    return done, timer.both()


def vw_sequential(stream: Stream, seed: int, adf: bool, prebuilt: bool, budget: float
                  ) -> tuple[int, tuple[float, float], float]:
    """VW predict + learn per example; ``prebuilt``: text examples built before the timer."""
    model = VWBandit(stream.k, seed, adf)
    X, y, idx, right, wrong = stream.X, stream.y, stream.idx, stream.right, stream.wrong
    texts = [vw_text(X[i], adf) for i in idx.tolist()] if prebuilt else None
    rng = np.random.default_rng(seed)
    uniforms = rng.random(len(idx)).tolist()
    errors = 0
    n = 0
    timer = Timer()
    for t, i in enumerate(idx.tolist()):
        text = texts[t] if texts is not None else vw_text(X[i], adf)
        played, prob = model.predict(text, uniforms[t])
        ok = played == y[i]
        errors += not ok
        click = right[t] if ok else wrong[t]
        model.learn(text, played, 1.0 - click, prob)
        n = t + 1
        if n % 256 == 0 and timer.elapsed() > budget:
            break
    times = timer.both()
    model.finish()
    return n, times, errors / max(n, 1)


def _repeat(fn: Callable[..., Measurement], repeats: int, *args: Any) -> Measurement:
    return _best([fn(*args) for _ in range(repeats)])


def _learner_seq(stream: Stream, task: str, alg: str, label: str, profile: Profile, seed: int,
                 logged: list[dict[str, Any]]) -> Measurement:
    model = build_learner(task, alg, stream, seed)
    n, s, err = run_sequential(model, stream, profile.time_budget, logged if not logged else None)
    return _measure(stream.name, label, "sequential", n, s, played_error=err)


def _learner_batch(stream: Stream, task: str, alg: str, label: str, profile: Profile, seed: int,
                   batch: dict[str, np.ndarray], chunk: int) -> Measurement:
    model = build_learner(task, alg, stream, seed)
    n, s = run_batch(model, batch, chunk, profile.batch_events, profile.time_budget)
    return _measure(stream.name, label, f"batch_{chunk}", n, s)


def _reference_seq(stream: Stream, seed: int) -> Measurement:
    n, s, err = reference_sequential(stream, seed)
    return _measure(stream.name, "numpy_reference", "sequential", n, s, played_error=err)


def _reference_batch(stream: Stream, batch: dict[str, np.ndarray], chunk: int, target: int
                     ) -> Measurement:
    n, s = reference_batch(batch, stream.k, chunk, target)
    return _measure(stream.name, "numpy_reference", f"batch_{chunk}", n, s)


def _vw_seq(stream: Stream, seed: int, adf: bool, prebuilt: bool, budget: float) -> Measurement:
    name = "vw --cb_explore_adf -q sa" if adf else f"vw --cb_explore {stream.k}"
    n, s, err = vw_sequential(stream, seed, adf, prebuilt, budget)
    return _measure(stream.name, name, "sequential" if prebuilt else "sequential_with_text",
                    n, s, played_error=err)


def paired_vw(stream: Stream, profile: Profile, seed: int) -> dict[str, Any]:
    """rcnbf sequential and VW ``--cb_explore`` (text prebuilt) timed back to back, in pairs.

    On a shared machine even CPU rates move by tens of percent within
    minutes (other processes share the cores' caches and hyper-threads), so
    best-of figures taken minutes apart make a fragile ratio.  Each pair
    here is two runs a few seconds apart; the median of the pairs' CPU-rate
    ratios is the figure the issue's goal is checked against.
    """
    rcnbf: list[float] = []
    vw: list[float] = []
    # one untimed pair first: the first runs of a fresh process were up to 40% slower
    # (caches, page faults of the stream, CPU frequency), which the median then inherited
    run_sequential(build_learner(*REFERENCE, stream, seed), stream, profile.time_budget)
    vw_sequential(stream, seed, False, True, profile.time_budget)
    for _ in range(2 * profile.repeats + 1):
        model = build_learner(*REFERENCE, stream, seed)
        n, times, _ = run_sequential(model, stream, profile.time_budget)
        rcnbf.append(_measure(stream.name, "rcnbf", "sequential", n, times).per_cpu_second)
        vw.append(_vw_seq(stream, seed, False, True, profile.time_budget).per_cpu_second)
    ratio = [a / b for a, b in zip(rcnbf, vw, strict=True)]
    return {"rcnbf_per_cpu_second": [round(v) for v in rcnbf],
            "vw_cb_explore_per_cpu_second": [round(v) for v in vw],
            "ratios": [round(r, 3) for r in ratio], "median": round(float(np.median(ratio)), 3)}


def bench_dataset(stream: Stream, profile: Profile, seed: int, with_vw: bool,
                  progress: Callable[[Measurement], None]) -> list[Measurement]:
    """Every mode of every learner (and the references) on one stream."""
    out: list[Measurement] = []

    def record(m: Measurement) -> None:
        out.append(m)
        progress(m)

    reps = profile.repeats
    record(_repeat(_reference_seq, reps, stream, seed))
    ref_logged: list[dict[str, Any]] = []
    for task in TASKS:
        for alg in algorithms(task):
            label = alg if task == TASKS[0] else f"{alg} ({task})"
            try:
                build_learner(task, alg, stream, seed)
            except ParamError as exc:
                record(_measure(stream.name, label, "sequential", 0, note=f"refused: {exc}"))
                continue
            logged: list[dict[str, Any]] = []
            record(_repeat(_learner_seq, reps, stream, task, alg, label, profile, seed, logged))
            if alg == "rcnbf":
                ref_logged = logged
            batch = stack_events(logged)
            for chunk in CHUNKS:
                record(_repeat(_learner_batch, reps, stream, task, alg, label, profile, seed,
                               batch, chunk))
    if ref_logged:
        ref_batch = stack_events(ref_logged)
        for chunk in CHUNKS:
            record(_repeat(_reference_batch, reps, stream, ref_batch, chunk,
                           profile.batch_events))
    if with_vw:
        for adf in (False, True):
            for prebuilt in (True, False):
                record(_repeat(_vw_seq, reps, stream, seed, adf, prebuilt, profile.time_budget))
    return out


def _find(results: Sequence[Measurement], dataset: str, learner: str, mode: str
          ) -> Measurement | None:
    for m in results:
        if (m.dataset, m.learner, m.mode) == (dataset, learner, mode) and m.events:
            return m
    return None


def ratios(results: Sequence[Measurement], datasets: Sequence[str], wall: bool = False
           ) -> dict[str, Any]:
    """rcnbf against the same-run references, per data set (None when a side is missing).

    From the CPU-time rates, or the wall-clock ones with ``wall``.
    """
    rate = "per_second" if wall else "per_cpu_second"
    out: dict[str, Any] = {}
    for ds in datasets:
        k = 9 if ds == "synsep" else 10
        pairs = {
            "rcnbf_seq_over_vw_cb_explore": (("rcnbf", "sequential"),
                                             (f"vw --cb_explore {k}", "sequential")),
            "rcnbf_seq_over_vw_cb_explore_with_text": (
                ("rcnbf", "sequential"), (f"vw --cb_explore {k}", "sequential_with_text")),
            "rcnbf_seq_over_vw_cb_explore_adf": (("rcnbf", "sequential"),
                                                 ("vw --cb_explore_adf -q sa", "sequential")),
            "rcnbf_seq_over_numpy_reference": (("rcnbf", "sequential"),
                                               ("numpy_reference", "sequential")),
            "rcnbf_batch_1000_over_numpy_reference": (("rcnbf", "batch_1000"),
                                                      ("numpy_reference", "batch_1000")),
            "rcnbf_batch_1000_over_seq": (("rcnbf", "batch_1000"), ("rcnbf", "sequential")),
        }
        row: dict[str, float | None] = {}
        for key, (a, b) in pairs.items():
            ma, mb = _find(results, ds, *a), _find(results, ds, *b)
            row[key] = (round(getattr(ma, rate) / getattr(mb, rate), 3) if ma and mb
                        else None)
        out[ds] = row
    return out


def goals(results: Sequence[Measurement], ratio: dict[str, Any],
          paired: dict[str, Any]) -> dict[str, Any]:
    """The issue's learner goals, evaluated on this run's CPU-time figures (None if not measured).

    The VW ratio is the median of the back-to-back pairs (:func:`paired_vw`)
    when they ran, else the best-of ratio.
    """
    vw_ratio = (paired["synsep"]["median"] if "synsep" in paired
                else ratio.get("synsep", {}).get("rcnbf_seq_over_vw_cb_explore"))
    batch = _find(results, "synsep", "rcnbf", "batch_1000")
    return {
        "rcnbf_seq_at_least_3x_vw_cb_explore": {
            "value": vw_ratio, "target": 3.0,
            "met": None if vw_ratio is None else vw_ratio >= 3.0},
        "synsep_batch_apply_at_least_1M_per_s": {
            "value": None if batch is None else round(batch.per_cpu_second),
            "target": 1_000_000,
            "met": None if batch is None else batch.per_cpu_second >= 1_000_000},
    }


def run(*, quick: bool = False, datasets: Sequence[str] = DATASETS, seed: int = 0,
        vw: bool = True, progress: Callable[[Measurement], None] | None = None
        ) -> dict[str, Any]:
    """Run the learner benchmark; returns the JSON-ready report."""
    profile = Profile.of(quick)
    with_vw = vw and vw_available()
    machine = machine_info()
    results: list[Measurement] = []
    paired: dict[str, Any] = {}
    for name in datasets:
        stream = Stream.load(name, profile.rounds, seed)
        results += bench_dataset(stream, profile, seed, with_vw, progress or (lambda m: None))
        if with_vw:
            paired[name] = paired_vw(stream, profile, seed)
    ratio = ratios(results, datasets)
    return {
        "benchmark": "learners",
        "machine": {**machine, "loadavg_end": [round(v, 2) for v in os.getloadavg()]},
        "config": {**asdict(profile), "quick": quick, "seed": seed, "datasets": list(datasets),
                   "rho0": RHO[0], "rho1": RHO[1], "gamma_reference": GAMMA,
                   "chunks": list(CHUNKS), "vowpalwabbit": with_vw},
        "results": [asdict(m) for m in results],
        "ratios": ratio,
        "ratios_wall": ratios(results, datasets, wall=True),
        "paired_rcnbf_over_vw_cb_explore": paired,
        "goals": goals(results, ratio, paired),
    }
