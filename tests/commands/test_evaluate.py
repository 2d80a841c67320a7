"""``noisyloop evaluate`` on generated Vowpal Wabbit ADF and Open Bandit Dataset logs."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.cli import main

CLICK = np.array([0.2, 0.5, 0.8])
"""Click probability of each action (item), whatever the context."""


def write_vw(path: Path, n: int, seed: int = 0) -> None:
    """``n`` ADF examples, three actions logged uniformly; a click is cost -1."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        a = int(rng.integers(3))
        click = rng.random() < CLICK[a]
        lines.append(f"shared |u age:{rng.normal():.3f} city=c{rng.integers(3)}")
        for k in range(3):
            label = f"0:{-1 if click else 0}:0.3333333333 " if k == a else ""
            lines.append(f"{label}|i item{k}")
        lines.append("")
    path.write_text("\n".join(lines), "utf-8")


def write_obd(folder: Path, n: int, seed: int = 0) -> Path:
    """An Open Bandit Dataset layout: items 10, 11, 12 at positions 1 and 2, logged uniformly."""
    rng = np.random.default_rng(seed)
    with (folder / "item_context.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["", "item_id", "item_feature_0"])
        writer.writerows([k, 10 + k, f"h{k}"] for k in range(3))
    path = folder / "all.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["", "timestamp", "item_id", "position", "click", "propensity_score",
                         "user_feature_0"])
        for i in range(n):
            a, position = int(rng.integers(3)), 1 + i % 2
            click = int(rng.random() < CLICK[a] / position)
            writer.writerow([i, i, 10 + a, position, click, 1 / 3, f"u{rng.integers(4)}"])
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["evaluate", "--no-progress", *args])
    out = capsys.readouterr().out
    return code, json.loads(out) if code == 0 else {}


@pytest.mark.slow
def test_vw_estimates_hold_the_fixed_actions_value(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log.vw"
    write_vw(log, 3000)
    code, result = run(capsys, "--log", str(log), "--format", "vw", "--policy", "fixed:2",
                       "--json", str(tmp_path / "out.json"), "--plot", str(tmp_path / "p.png"))
    assert code == 0
    assert json.loads((tmp_path / "out.json").read_text()) == result
    assert result["n"] == 3000
    for name in ("ips", "snips", "dr"):
        estimate = result[name]
        assert isinstance(estimate, dict)
        assert estimate["ci_low"] <= 0.8 <= estimate["ci_high"], name
    assert 900 < float(result["ess"]) < 1100  # the events that took action 2 (weight 3)
    assert result["correction"] == {"reward": "f (no noise correction)", "rho0": None,
                                    "rho1": None}
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_vw_noise_correction_and_logging_policy(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log.vw"
    write_vw(log, 500)
    _, raw = run(capsys, "--log", str(log), "--format", "vw", "--policy", "logging")
    code, fixed = run(capsys, "--log", str(log), "--format", "vw", "--policy", "logging",
                      "--rho0", "0.1", "--rho1", "0.3")
    assert code == 0
    assert raw["ess"] == 500
    ips_raw, ips_fixed = raw["ips"], fixed["ips"]
    assert isinstance(ips_raw, dict) and isinstance(ips_fixed, dict)
    assert ips_fixed["value"] == pytest.approx((ips_raw["value"] - 0.1) / 0.6)
    assert fixed["correction"] == {"reward": "h(f) = (f - rho0) / (1 - rho0 - rho1)",
                                   "rho0": 0.1, "rho1": 0.3}


def test_obd_evaluates_each_position(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = write_obd(tmp_path, 4000, seed=3)  # seed 0: slot 0's IPS 2.1 SE off the truth
    code, result = run(capsys, "--log", str(path), "--format", "obd", "--policy", "fixed:12")
    assert code == 0
    positions = result["positions"]
    assert isinstance(positions, list) and [p["position"] for p in positions] == [0, 1]
    for p, truth in zip(positions, (0.8, 0.4), strict=True):
        assert p["n"] == 2000
        assert p["ips"]["ci_low"] <= truth <= p["ips"]["ci_high"]
        assert p["dr"]["ci_low"] <= truth <= p["dr"]["ci_high"]
    overall = result["ips"]
    assert isinstance(overall, dict) and overall["ci_low"] <= 0.6 <= overall["ci_high"]
    _, uniform = run(capsys, "--log", str(path), "--format", "obd", "--policy", "uniform")
    assert uniform["ess"] == pytest.approx(4000)  # propensity 1/3 = 1 / number of items


@pytest.mark.parametrize(("args", "message"), [
    (["--policy", "model:snap.bin"], "model:SNAPSHOT_FILE needs --format noisyloop"),
    (["--policy", "fixed:7"], "fixed action 7"),
    (["--policy", "uniform", "--rho0", "0.1"], "give both rho0 and rho1"),
    (["--policy", "uniform", "--rho0", "0.6", "--rho1", "0.5"], "rho1: 1 - rho0 - rho1"),
])
def test_bad_input_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     args: list[str], message: str) -> None:
    log = tmp_path / "log.vw"
    write_vw(log, 20)
    assert main(["evaluate", "--log", str(log), "--format", "vw", *args]) == 2
    assert message in capsys.readouterr().err


def test_help_says_what_is_not_available_yet(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    assert "model:SNAPSHOT_FILE" in capsys.readouterr().out


def test_obd_items_missing_from_item_context_are_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_obd(tmp_path, 20)
    other = tmp_path / "other.csv"
    text = log.read_text("utf-8").splitlines()
    other.write_text("\n".join([text[0], text[1].replace(",10,", ",99,").replace(",11,", ",99,")
                                .replace(",12,", ",99,")]) + "\n", "utf-8")
    for args, message in ((["--log", str(other), "--policy", "uniform"], "item ids [99]"),
                          (["--log", str(log), "--policy", f"empirical:{other}"],
                           f"--policy: {other}: item ids [99]")):
        assert main(["evaluate", "--no-progress", "--format", "obd", *args]) == 2
        assert message in capsys.readouterr().err, args


def write_rank_log(path: Path, requests: int, seed: int = 0) -> np.ndarray:
    """A noisyloop rank log (3 slots of 6 candidates) of a trust-bias stream
    (:func:`app.sim.trust.simulated_placements`); returns its clicks, ``requests x 3``."""
    from app.sim.trust import simulated_placements

    _, prob, _, click, _ = simulated_placements(requests, seed=seed)
    prob, click = prob.reshape(requests, 3), click.reshape(requests, 3)
    lines = [json.dumps({"type": "event", "features": [1.0], "n_candidates": 6,
                         "slots": [{"slot": k, "propensity": prob[i, k], "click": click[i, k]}
                                   for k in range(3)]}) for i in range(requests)]
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return click


def test_slot_rates_correct_each_slot_of_a_rank_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.sim.trust import RHO1, THETA, TRUST_RHO0

    log, rates = tmp_path / "rank.jsonl", tmp_path / "noise.json"
    clicks = write_rank_log(log, 500)
    slots = [{"slot": k, "theta": t, "rho0": r, "rho1": RHO1,
              "interval": {"theta": [t, t], "rho0": [r - 0.02, r + 0.02], "rho1": [0.09, 0.11]}}
             for k, (t, r) in enumerate(zip(THETA, TRUST_RHO0, strict=True))]
    rates.write_text(json.dumps({"status": "published", "slots": slots}), "utf-8")
    common = ["--log", str(log), "--format", "noisyloop", "--policy", "logging",
              "--bootstrap", "20"]
    code, result = run(capsys, *common, "--slot-rates", str(rates))
    assert code == 0
    theta, rho0 = np.array(THETA), np.array(TRUST_RHO0)
    expected = (clicks.mean(axis=0) - theta * rho0) / (theta * (1.0 - rho0 - RHO1))
    assert [p["ips"]["value"] for p in result["positions"]] == pytest.approx(expected)
    assert result["correction"]["rate_uncertainty"]["rho0_se"] == pytest.approx(
        [0.02 / 1.959964] * 3, rel=1e-5)
    assert main(["evaluate", *common, "--slot-rates", str(rates), "--rho0", "0.1",
                 "--rho1", "0.1"]) == 2
    assert "not both" in capsys.readouterr().err
    rates.write_text(json.dumps({"status": "insufficient_data", "reason": "too_few_events",
                                 "slots": None}), "utf-8")
    assert main(["evaluate", *common, "--slot-rates", str(rates)]) == 2
    assert "--slot-rates: " in capsys.readouterr().err
    vw = tmp_path / "log.vw"
    write_vw(vw, 20)
    assert main(["evaluate", "--log", str(vw), "--format", "vw", "--policy", "uniform",
                 "--slot-rates", str(rates)]) == 2
    assert "--slot-rates needs --format noisyloop" in capsys.readouterr().err


def test_obd_positions_add_up_to_the_pooled_value_for_every_estimator_but_snips(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The positions' IPS and DR weighted by their impressions are the pooled IPS and DR:
    one reward model serves the log and its positions (fitted per position, DR's positions
    did not add up).  SNIPS normalises each position by its own weights: a ratio of sums,
    it adds up only where the positions' mean weights agree."""
    path = write_obd(tmp_path, 3000, seed=1)
    for policy in ("uniform", "fixed:12"):
        _, result = run(capsys, "--log", str(path), "--format", "obd", "--policy", policy)
        n = np.array([p["n"] for p in result["positions"]])
        for name in ("ips", "dr"):
            weighted = n @ [p[name]["value"] for p in result["positions"]] / n.sum()
            assert weighted == pytest.approx(result[name]["value"], abs=1e-12), (policy, name)


def test_a_log_whose_weight_rests_on_a_few_events_is_flagged_with_a_bound_that_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One row logged with probability 0.000001 (as in the Open Bandit Dataset's women/BTS
    log) carries nearly all the uniform policy's weight: the effective sample size is about
    1, so the result and that row's position are flagged ``insufficient_data`` and each
    interval widened to the betting bound, which holds the truth (the bootstrap alone gave
    an ordinary-looking interval, unflagged)."""
    path = write_obd(tmp_path, 2000, seed=2)
    rows = path.read_text().splitlines()
    cells = rows[7].split(",")
    cells[5] = "0.000001"
    rows[7] = ",".join(cells)
    path.write_text("\n".join(rows) + "\n")
    _, result = run(capsys, "--log", str(path), "--format", "obd", "--policy", "uniform")
    truth = {1: float(np.mean(CLICK)), 2: float(np.mean(CLICK)) / 2}
    heavy = 1 + (7 - 1) % 2  # the position of the row changed (line 7: event 6)
    assert result["ess"] < 100 and result["insufficient_data"] is True, result
    assert "effective sample size" in result["reason"]
    for name in ("ips", "snips", "dr"):
        assert result[name]["ci_low"] <= (truth[1] + truth[2]) / 2 <= result[name]["ci_high"]
    flagged = result["positions"][heavy - 1]
    assert flagged["insufficient_data"] is True and flagged["ess"] < 100, flagged
    for name in ("ips", "snips", "dr"):
        assert flagged[name]["ci_low"] <= truth[heavy] <= flagged[name]["ci_high"], name
    other = result["positions"][2 - heavy]
    assert "insufficient_data" not in other and other["ess"] > 900, other
