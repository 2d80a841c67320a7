"""``noisyloop replay --task rank --dataset vw:PATH | obd:PATH``: replay over simulated logs.

The logs are written from :class:`app.sim.rank.RankSimulator`, whose true relevance gives
each policy's true value: uniform logging keeps the replayed value of a fixed policy within
a few standard errors of it, a learner's kept reward rises, and a skewed logging policy
is corrected by the rejection step.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.cli import main
from app.sim.rank import RankSimulator

THETA = (1.0, 0.6, 0.35)
#: A fixed policy that never learns: learning is deferred past the end of the log, so
#: every score stays 0 and temperature 0 plays candidate 0 (or uniform with epsilon 1).
FIRST = ["--learn-batch", "1000000", "--params", '{"temperature": 0, "epsilon": 0}']
UNIFORM = ["--learn-batch", "1000000", "--params", '{"epsilon": 1}']


def _features(prefix: str, values: np.ndarray) -> str:
    return prefix + " ".join(f"f{j}:{v:.6g}" for j, v in enumerate(values.tolist()))


def write_vw(path: Path, n: int, skew: float | None = None, seed: int = 0) -> np.ndarray:
    """``n`` ADF examples of 10 candidates sorted best first (by true relevance), one logged
    uniformly (or candidate 0 with probability ``skew``); the true relevance, ``n x 10``."""
    sim = RankSimulator(n_features=8, n_action_features=8, n_items=300, n_candidates=10,
                        slots=1, theta=(1.0,), rho0=0.0, rho1=0.0, churn=0.0, seed=seed)
    rng = np.random.default_rng([seed, 7])
    k = sim.n_candidates
    p = np.full(k, 1 / k) if skew is None else np.r_[skew, np.full(k - 1, (1 - skew) / (k - 1))]
    truth, lines = np.zeros((n, k)), []
    for t in range(n):
        request = sim.request()
        order = np.argsort(-request.relevance)
        truth[t] = request.relevance[order]
        a = int(rng.choice(k, p=p))
        click = rng.random() < truth[t, a]
        lines.append(_features("shared |u ", request.x[1:]))
        for j, row in enumerate(request.actions[order]):
            label = f"0:{-1 if click else 0}:{p[a]:.17g} " if j == a else ""
            lines.append(_features(label + "|i ", row))
        lines.append("")
    path.write_text("\n".join(lines), "utf-8")
    return truth


def write_obd(folder: Path, n: int, slates: bool, seed: int = 0) -> tuple[Path, np.ndarray]:
    """``n`` impressions of 3 positions over 20 items logged uniformly without replacement,
    with or without ``slate_id``; the true relevance of the items, ``n x 20``."""
    sim = RankSimulator(n_features=8, n_action_features=8, n_items=20, n_candidates=20,
                        slots=3, theta=THETA, rho0=0.0, rho1=0.0, churn=0.0, seed=seed)
    rng = np.random.default_rng([seed, 7])
    items = sim.items  # row i is item_id i
    with (folder / "item_context.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["", "item_id", *(f"item_feature_{j}" for j in range(8))])
        writer.writerows([i, i, *row] for i, row in enumerate(items.tolist()))
    truth = np.zeros((n, 20))
    path = folder / "all.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["", "item_id", "position", "click", "propensity_score",
                         *(f"user_feature_{j}" for j in range(7)),
                         *(["slate_id", "pscore_cascade"] if slates else [])])
        for t in range(n):
            x = sim.request().x
            truth[t] = sim.relevance(x, items)
            shown = rng.permutation(20)[:3]
            for k, item in enumerate(shown.tolist()):
                click = int(rng.random() < THETA[k] * truth[t, item])
                cascade = float(np.prod(1 / (20 - np.arange(k + 1))))
                writer.writerow([3 * t + k, item, k + 1, click, 1 / 20, *x[1:],
                                 *([t, cascade] if slates else [])])
    return path, truth


def replay(tmp_path: Path, dataset: str, *args: str) -> dict[str, Any]:
    out = tmp_path / "replay.json"
    assert main(["replay", "--task", "rank", "--dataset", dataset, "--no-progress",
                 "--json", str(out), *args]) == 0
    record: dict[str, Any] = json.loads(out.read_text())
    return record


def assert_close(record: dict[str, Any], value: float) -> None:
    """Within 4 standard errors of a Bernoulli mean over the kept events."""
    tolerance = 4 * np.sqrt(value * (1 - value) / record["kept_events"])
    assert abs(record["final_kept_reward"] - value) < tolerance, (record, value)


@pytest.fixture(scope="module")
def vw_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    path = tmp_path_factory.mktemp("vw") / "log.vw"
    return path, write_vw(path, 12_000)


@pytest.mark.slow
def test_vw_uniform_log_fixed_policies_hold_their_true_values(
        tmp_path: Path, vw_log: tuple[Path, np.ndarray]) -> None:
    path, truth = vw_log
    first = replay(tmp_path, f"vw:{path}", *FIRST)
    assert first["metric"] == "kept_reward" and first["acceptance"] == "uniform"
    assert first["log_events"] == 12_000 and 1_000 < first["kept_events"] < 1_400
    assert first["layout"] == "vw" and first["slots"] == 1
    assert_close(first, truth[:, 0].mean())  # the best candidate, well above uniform
    uniform = replay(tmp_path, f"vw:{path}", *UNIFORM)
    assert_close(uniform, truth.mean())
    assert first["final_kept_reward"] > uniform["final_kept_reward"] + 0.15
    assert len(first["curve"]) == 100 and first["curve"][-1][0] == 12_000


@pytest.mark.slow
def test_vw_learner_kept_reward_rises(tmp_path: Path,
                                      vw_log: tuple[Path, np.ndarray]) -> None:
    path, truth = vw_log
    record = replay(tmp_path, f"vw:{path}", "--algorithm", "ridge_pl")
    assert record["kept_reward_last_quarter"] > record["kept_reward_first_quarter"] + 0.1
    assert record["kept_reward_last_quarter"] > truth.mean() + 0.15


@pytest.mark.slow
def test_vw_skewed_logging_is_corrected_by_rejection(tmp_path: Path) -> None:
    path = tmp_path / "skewed.vw"
    truth = write_vw(path, 12_000, skew=0.5, seed=1)
    record = replay(tmp_path, f"vw:{path}", *UNIFORM)
    assert record["acceptance"] == "rejection p_min / p"
    assert record["p_min"] == pytest.approx(0.5 / 9)
    assert 0.04 < record["kept_share"] < 0.07
    # without the rejection step half the kept events would be candidate 0 (the best)
    assert_close(record, truth.mean())


@pytest.mark.slow
def test_obd_slates_fixed_policy_and_learner(tmp_path: Path) -> None:
    path, truth = write_obd(tmp_path, 12_000, slates=True)
    uniform = replay(tmp_path, f"obd:{path}", *UNIFORM)
    assert uniform["layout"] == "obd slates" and uniform["slots"] == 3
    assert uniform["candidates_mean"] == 20 and 450 < uniform["kept_events"] < 750
    assert_close(uniform, truth.mean())
    learner = replay(tmp_path, f"obd:{path}", "--learn-batch", "100")
    assert learner["kept_reward_last_quarter"] > learner["kept_reward_first_quarter"] + 0.1


@pytest.mark.slow
def test_obd_rows_without_slate_ids_are_one_slot_decisions(tmp_path: Path) -> None:
    path, truth = write_obd(tmp_path, 6_000, slates=False)
    record = replay(tmp_path, f"obd:{path}", *UNIFORM)
    assert record["layout"] == "obd rows" and record["log_events"] == 18_000
    assert record["context_features"] == 1 + 7 + 3  # constant, user features, positions
    assert_close(record, float(np.mean(THETA) * truth.mean()))


@pytest.mark.parametrize(("args", "field"), [
    (["--dataset", "vw:/nonexistent/log.vw"], "--dataset"),
    (["--dataset", "obd:/nonexistent/all.csv"], "--dataset"),
    (["--dataset", "csv:log.vw"], "--dataset"),
    (["--dataset", "vw:{vw}", "--candidates", "5"], "--candidates"),
    (["--dataset", "vw:{vw}", "--trust", "0.1,0.1,0.1"], "--trust"),
    (["--dataset", "vw:{vw}", "--estimator", "anchor"], "--estimator"),
    (["--dataset", "vw:{vw}", "--params", '{"slots": 2}'], "--params"),
    (["--dataset", "vw:{bad}"], "--dataset"),
    (["--dataset", "obd:{vw}"], "--dataset"),
])
def test_bad_input_exits_2_naming_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             args: list[str], field: str) -> None:
    vw, bad = tmp_path / "log.vw", tmp_path / "bad.vw"
    write_vw(vw, 5)
    bad.write_text("shared |u a:1\n0:2:0.5 |i b:1\n|i c:1\n", "utf-8")  # reward -2
    args = [a.replace("{vw}", str(vw)).replace("{bad}", str(bad)) for a in args]
    assert main(["replay", "--task", "rank", "--no-progress", *args]) == 2
    assert f"error: {field}" in capsys.readouterr().err
