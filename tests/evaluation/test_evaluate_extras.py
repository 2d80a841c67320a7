"""``noisyloop evaluate``'s slate estimates, rate errors and empirical policies on generated
Open Bandit Dataset layouts whose true values are known."""

from __future__ import annotations

import csv
from itertools import permutations
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from tests.commands.test_evaluate import CLICK, run, write_obd, write_vw

ITEMS = (10, 11, 12)
HEADER = ["", "timestamp", "item_id", "position", "click", "propensity_score", "user_feature_0"]


def write_items(folder: Path) -> None:
    with (folder / "item_context.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["", "item_id", "item_feature_0"])
        writer.writerows([k, item, f"h{k}"] for k, item in enumerate(ITEMS))


def write_slates(folder: Path, n: int, weights: np.ndarray, seed: int = 0) -> Path:
    """``n`` slates of two of the three items, drawn one slot at a time in proportion to
    ``weights`` (Plackett-Luce); the user clicks the first item that attracts them
    (probability :data:`CLICK`) and stops."""
    rng = np.random.default_rng(seed)
    write_items(folder)
    path = folder / "slates.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*HEADER, "slate_id", "pscore_cascade"])
        for i in range(n):
            first = int(rng.choice(3, p=weights / weights.sum()))
            rest = np.delete(np.arange(3), first)
            second = int(rng.choice(rest, p=weights[rest] / weights[rest].sum()))
            p0 = weights[first] / weights.sum()
            p1 = p0 * weights[second] / weights[rest].sum()
            clicked = rng.random() < CLICK[first]
            clicks = (int(clicked), int(not clicked and rng.random() < CLICK[second]))
            for slot, (item, click, cascade) in enumerate(zip((first, second), clicks,
                                                              (p0, p1), strict=True)):
                writer.writerow([2 * i + slot, i, ITEMS[item], slot + 1, click, 0.5, "u",
                                 f"s{i}", cascade])
    return path


@pytest.mark.slow
def test_slate_logs_get_reward_interaction_estimates(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = write_slates(tmp_path, 4000, np.array([1.0, 2.0, 6.0]))
    code, result = run(capsys, "--log", str(path), "--format", "obd", "--policy", "uniform")
    assert code == 0
    slates = result["slates"]
    truth = np.mean([1 - (1 - CLICK[a]) * (1 - CLICK[b]) for a, b in permutations(range(3), 2)])
    assert slates["n_slates"] == 4000 and slates["slots"] == 2
    for name in ("rips", "snrips"):
        assert slates[name]["ci_low"] <= truth <= slates[name]["ci_high"], name
    _, logging = run(capsys, "--log", str(path), "--format", "obd", "--policy", "logging")
    clicks = np.array([row["click"] for row in csv.DictReader(path.open())], dtype=float)
    assert logging["slates"]["rips"]["value"] == pytest.approx(clicks.sum() / 4000)
    _, fixed = run(capsys, "--log", str(path), "--format", "obd", "--policy", "fixed:12")
    assert "slates" not in fixed  # always one item is not a slate


def test_incomplete_slates_are_refused(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = write_slates(tmp_path, 10, np.ones(3))
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")
    assert main(["evaluate", "--log", str(path), "--format", "obd", "--policy", "uniform"]) == 2
    assert "one row per position" in capsys.readouterr().err


def test_rate_errors_widen_the_intervals_and_are_reported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log.vw"
    write_vw(log, 2000)
    args = ["--log", str(log), "--format", "vw", "--policy", "fixed:2", "--rho0", "0.1",
            "--rho1", "0.3"]
    _, exact = run(capsys, *args)
    code, spread = run(capsys, *args, "--rho0-se", "0.02", "--rho1-se", "0.04")
    assert code == 0
    assert spread["ips"]["value"] == exact["ips"]["value"]
    width = {r: [d[r]["ci_high"] - d[r]["ci_low"] for d in (exact, spread)]
             for r in ("ips", "snips", "dr")}
    assert all(w[1] > 1.3 * w[0] for w in width.values()), width
    assert spread["correction"]["rate_uncertainty"]["rho1_se"] == 0.04
    assert main(["evaluate", "--log", str(log), "--format", "vw", "--policy", "uniform",
                 "--rho0-se", "0.01"]) == 2
    assert "need rho0 and rho1" in capsys.readouterr().err


def write_skewed_obd(folder: Path, n: int, share: np.ndarray, seed: int) -> Path:
    """An OBD log whose policy shows item ``k`` at either position with ``share[k]``,
    whatever the user, logged with that propensity; clicks ``CLICK / position``."""
    rng = np.random.default_rng(seed)
    write_items(folder)
    path = folder / "all.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER)
        for i in range(n):
            a, position = int(rng.choice(3, p=share)), 1 + i % 2
            click = int(rng.random() < CLICK[a] / position)
            writer.writerow([i, i, ITEMS[a], position, click, share[a], f"u{rng.integers(4)}"])
    return path


@pytest.mark.slow
def test_an_empirical_policy_is_evaluated_on_another_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "other").mkdir()
    share = np.array([0.1, 0.2, 0.7])
    other = write_skewed_obd(tmp_path / "other", 20_000, share, seed=1)
    uniform = write_obd(tmp_path, 4000)
    code, result = run(capsys, "--log", str(uniform), "--format", "obd",
                       "--policy", f"empirical:{other}")
    assert code == 0
    truth = float(share @ CLICK) * (1 + 1 / 2) / 2  # positions 1 and 2 equally often
    for name in ("ips", "snips", "dr"):
        assert result[name]["ci_low"] <= truth <= result[name]["ci_high"], name
    assert main(["evaluate", "--log", str(tmp_path / "x.vw"), "--format", "vw",
                 "--policy", f"empirical:{other}"]) == 2
    assert "needs --format obd" in capsys.readouterr().err


def test_slates_resting_on_a_few_slates_are_flagged_with_a_bound_that_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A logging policy that shows one item first 94% of the time: a uniform slate's weights
    rest on a few slates (an effective sample size below 100 at some slot), so ``slates``
    is flagged ``insufficient_data`` and widened to the sum of the slots' betting bounds,
    which holds the truth (it was not flagged)."""
    path = write_slates(tmp_path, 2000, np.array([1.0, 5.0, 100.0]), seed=1)
    _, result = run(capsys, "--log", str(path), "--format", "obd", "--policy", "uniform")
    slates = result["slates"]
    truth = np.mean([1 - (1 - CLICK[a]) * (1 - CLICK[b]) for a, b in permutations(range(3), 2)])
    assert slates["insufficient_data"] is True, slates
    assert "effective sample size" in slates["reason"]
    for name in ("rips", "snrips"):
        assert slates[name]["ci_low"] <= truth <= slates[name]["ci_high"], (name, slates)
