"""``noisyloop evaluate`` says what it takes and what is wrong: every policy form in its
usage line, a missing ``item_context.csv`` named with what it is for, another campaign's
log refused as ``empirical:``, and a rank log's plot drawing every slot."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.cli import main
from app.commands import evaluate
from tests.commands.test_evaluate import run, write_obd, write_rank_log


def test_usage_line_lists_every_policy_form(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate"])  # no arguments: the usage line and the missing options
    usage = " ".join(capsys.readouterr().err.split())
    for form in ("uniform", "logging", "fixed:ID", "empirical:FILE", "model:SNAPSHOT_FILE",
                 "model-greedy:SNAPSHOT_FILE", "config:JSON"):
        assert form in usage.split("--policy", 1)[1], form


def test_missing_item_context_is_named_with_what_it_is_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_obd(tmp_path, 20)
    (tmp_path / "item_context.csv").unlink()
    assert main(["evaluate", "--no-progress", "--format", "obd", "--log", str(log),
                 "--policy", "uniform"]) == 2
    err = capsys.readouterr().err
    assert f"--log: {tmp_path / 'item_context.csv'} is missing" in err
    assert "items (item_id and their item_feature_* columns)" in err
    assert "No such file" not in err


def test_empirical_log_of_other_items_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A campaign of fewer items (ids 10, 11) than the evaluated log's (10, 11, 12): every id
    of its log falls among the evaluated ones, and it is still another campaign's."""
    log = write_obd(tmp_path, 200)
    other = tmp_path / "men"
    other.mkdir()
    men = write_obd(other, 200, seed=1)
    lines = men.read_text("utf-8").splitlines()
    men.write_text("\n".join([lines[0], *(row for row in lines[1:]
                                          if row.split(",")[2] != "12")]) + "\n", "utf-8")
    items = (other / "item_context.csv").read_text("utf-8").splitlines()
    (other / "item_context.csv").write_text("\n".join(items[:3]) + "\n", "utf-8")
    assert main(["evaluate", "--no-progress", "--format", "obd", "--log", str(log),
                 "--policy", f"empirical:{men}"]) == 2
    err = capsys.readouterr().err
    assert f"--policy: {men} is a log of other items" in err
    assert "lists 2 items (10, 11), the evaluated log's 3 (10, 11, 12)" in err
    # without its own item_context.csv: named, with what it is for
    (other / "item_context.csv").unlink()
    assert main(["evaluate", "--no-progress", "--format", "obd", "--log", str(log),
                 "--policy", f"empirical:{men}"]) == 2
    assert (f"--policy: empirical:FILE: {other / 'item_context.csv'} is missing"
            in capsys.readouterr().err)
    # a log of the same items (the same campaign under another policy) is taken
    same = tmp_path / "bts"
    same.mkdir()
    shutil.copy(tmp_path / "item_context.csv", same / "item_context.csv")
    code, result = run(capsys, "--format", "obd", "--log", str(log), "--bootstrap", "20",
                       "--policy", f"empirical:{write_obd(same, 200, seed=2)}")
    assert code == 0 and result["n"] == 200


def test_rank_log_plot_draws_every_slot(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    log = tmp_path / "rank.jsonl"
    write_rank_log(log, 300)
    code, result = run(capsys, "--log", str(log), "--format", "noisyloop", "--policy",
                       "logging", "--bootstrap", "20", "--plot", str(tmp_path / "p.png"))
    assert code == 0 and (tmp_path / "p.png").stat().st_size > 0
    fig = evaluate.figure(result)
    try:
        ax = fig.axes[0]
        assert len(ax.containers) == 3  # one errorbar set per slot
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [
            "slot 0", "slot 1", "slot 2"]
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_plot_draws_a_null_estimate_as_its_interval_alone() -> None:
    """A SNIPS with no weighted event has no point estimate (``value`` null) and a log
    format without DR has none: the plot leaves the missing one out, draws the null one's
    interval alone, and does not fail."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    result = {"ips": {"value": 0.0, "ci_low": 0.0, "ci_high": 0.2},
              "snips": {"value": None, "ci_low": 0.0, "ci_high": 1.0},
              "n": 10, "ess": 0.0, "correction": {"rho0": None}, "policy": "fixed:3",
              "log": "log.jsonl"}
    fig = evaluate.figure(result)
    try:
        ax = fig.axes[0]
        (bars,) = ax.containers
        assert list(bars[0].get_xdata()) == [0.0]  # IPS's point only
        (dashed,) = ax.collections[-1:]
        assert dashed.get_segments()[0].tolist() == [[1.0, 0.0], [1.0, 1.0]]  # SNIPS
    finally:
        plt.close(fig)
