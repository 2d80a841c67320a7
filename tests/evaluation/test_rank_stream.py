"""Rank logs streamed: ``noisyloop evaluate`` on a rank log's JSON Lines and Parquet exports,
in batches and over two processes, gives the numbers of the in-memory evaluation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.cli import main
from app.evaluation import parquetlog, servicelog
from app.evaluation.estimators import ESTIMATORS, Options
from app.evaluation.rankings import (
    RankLog,
    evaluate_ranking,
    evaluate_ranking_parts,
    placements,
    rank_policy,
)
from app.evaluation.rates import SlotRates
from app.evaluation.servicelog import rank_log_of
from app.evaluation.sums import row_keys
from app.store.logrecords import entry_records
from tests.evaluation.test_rankings import rank_log
from tests.evaluation.test_servicelog import RANK_LINES

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

RHO0, RHO1, BOOT = 0.05, 0.1, 100
#: Per-slot rates with standard errors (drawn per resample).
SLOT_RATES = SlotRates((1.0, 0.6, 0.35), (0.2, 0.12, 0.06), 0.1, (0.0, 0.02, 0.02),
                       (0.01, 0.01, 0.01), 0.01)


def export_records(seed: int, events: int) -> list[dict[str, Any]]:
    """The lines of a rank model's export: its logged rankings, a marker now and then."""
    entries, _, _ = rank_log(seed, events)
    records: list[dict[str, Any]] = []
    for i, entry in enumerate(entries):
        if i % 3 == 1:
            records.append({"type": "promote", "stream_id": f"{i}-9",
                            "time": "2026-11-27T10:00:00.000+00:00", "version": i})
        records += entry_records(entry)
    return records


def evaluate(capsys: pytest.CaptureFixture[str], log: Path | str, policy: str,
             *args: str, rates: tuple[str, ...] = ("--rho0", str(RHO0), "--rho1", str(RHO1))
             ) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["evaluate", "--no-progress", "--log", str(log), "--format", "noisyloop",
                 "--policy", policy, "--bootstrap", str(BOOT), *rates, *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result: dict[str, Any] = json.loads(captured.out)
    return result


def same(a: dict[str, Any], b: dict[str, Any], names: tuple[str, ...] = ESTIMATORS) -> None:
    """Every estimate, interval, count and flag of ``a`` is ``b``'s to 1e-9 relative."""
    assert a["n"] == b["n"]
    assert a.get("insufficient_data") == b.get("insufficient_data")
    assert a["ess"] == pytest.approx(b["ess"], rel=1e-9)
    for name in names:
        for field in ("value", "ci_low", "ci_high"):
            assert a[name][field] == pytest.approx(b[name][field], rel=1e-9), (name, field)


def same_result(a: dict[str, Any], b: dict[str, Any]) -> None:
    same(a, b)
    assert a["slot_impressions"] == b["slot_impressions"]
    assert len(a["positions"]) == len(b["positions"])
    for p, q in zip(a["positions"], b["positions"], strict=True):
        same(p, q)
    assert ("slates" in a) == ("slates" in b)
    if "slates" in a:
        for name in ("rips", "snrips"):
            for field in ("value", "ci_low", "ci_high"):
                assert a["slates"][name][field] == pytest.approx(b["slates"][name][field],
                                                                 rel=1e-9), (name, field)


@pytest.mark.slow
def test_a_rank_log_streamed_and_over_two_workers_is_the_same_as_in_memory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parquetlog, "BATCH_ROWS", 170)
    monkeypatch.setattr(servicelog, "BATCH_LINES", 230)
    records = export_records(0, 1_200)
    (tmp_path / "logs").mkdir()
    with open(tmp_path / "log.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    half = len(records) // 2
    for k, rows in enumerate((records[:half], records[half:])):
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "logs" / f"part-{k}.parquet",
                       row_group_size=250)
    read = rank_log_of(records)
    assert read.ranking is not None and read.keys is not None
    flagged = {}
    for policy in ("uniform", "logging"):
        memory = evaluate_ranking(read.ranking, placements(read.ranking, policy), RHO0, RHO1,
                                  n_boot=BOOT, keys=read.keys)
        jsonl = evaluate(capsys, tmp_path / "log.jsonl", policy)
        one = evaluate(capsys, tmp_path / "logs", policy)
        two = evaluate(capsys, tmp_path / "logs", policy, "--workers", "2")
        assert memory["n"] == 1_200 and "slates" in memory
        for streamed in (jsonl, one, two):
            same_result(streamed, memory)
        flagged[policy] = [p.get("insufficient_data", False) for p in memory["positions"]]
    # the uniform ranking's slots rest on a few events (the learned logging policy ranks
    # far from uniform): the pass gathering their weights ran, in batches and in workers
    assert flagged == {"uniform": [True] * 3, "logging": [False] * 3}
    # per-slot rates (--slot-rates): each slot corrected by its own, alike in every path
    slots = [{"slot": k, "theta": t, "rho0": r, "rho1": SLOT_RATES.rho1}
             for k, (t, r) in enumerate(zip(SLOT_RATES.theta, SLOT_RATES.rho0, strict=True))]
    (tmp_path / "noise.json").write_text(json.dumps({"slots": slots}))
    exact = SlotRates.from_slots(slots)
    memory = evaluate_ranking(read.ranking, None, n_boot=BOOT, keys=read.keys, rates=exact)
    by_file = ("--slot-rates", str(tmp_path / "noise.json"))
    for streamed in (evaluate(capsys, tmp_path / "log.jsonl", "logging", rates=by_file),
                     evaluate(capsys, tmp_path / "logs", "logging", "--workers", "2",
                              rates=by_file)):
        same_result(streamed, memory)
        assert streamed["correction"]["theta"] == list(SLOT_RATES.theta)


def test_a_parquet_rank_batch_reads_the_rankings_of_its_rows(tmp_path: Path) -> None:
    lines = RANK_LINES
    pq.write_table(pa.Table.from_pylist(lines), tmp_path / "r.parquet")
    (part,) = parquetlog.parts([str(tmp_path / "r.parquet")])
    ((log, keys),) = parquetlog.rank_batches(part)
    expected = rank_log_of(lines)
    assert expected.ranking is not None and expected.keys is not None
    assert keys.tolist() == expected.keys.tolist() == [0, 2]
    for name in ("X", "clicks", "propensities", "shown", "candidates"):
        np.testing.assert_array_equal(getattr(log, name), getattr(expected.ranking, name))


def test_a_parquet_ranking_with_slots_out_of_order_is_refused(tmp_path: Path) -> None:
    pq.write_table(pa.Table.from_pylist([{"type": "event", "features": [1.0], "slots": [
        {"slot": 1, "propensity": 1.0}]}]), tmp_path / "r.parquet")
    (part,) = parquetlog.parts([str(tmp_path / "r.parquet")])
    with pytest.raises(ValueError, match=r"not 0, 1, \.\.\. in order"):
        list(parquetlog.rank_batches(part))


def test_batches_of_different_widths_merge_into_the_one_batch_numbers() -> None:
    """Batches whose rankings show fewer slots than later ones (the slots' sums and reward
    models grow as they merge) give the numbers of the log in one batch."""
    rng = np.random.default_rng(5)
    n, slots = 900, 3
    shown = np.where(np.arange(n) < 200, 1, rng.integers(1, slots + 1, n))
    mask = np.arange(slots) < shown[:, None]
    log = RankLog(X=rng.standard_normal((n, 2)),
                  clicks=np.where(mask, rng.random((n, slots)) < 0.3, 0.0),
                  propensities=np.where(mask, rng.uniform(0.1, 1.0, (n, slots)), 1.0),
                  shown=shown, candidates=rng.integers(3, 9, n))
    keys = row_keys(np.arange(n) * 2 + 1)  # a marker line before every event
    bounds = [(0, 200), (200, 550), (550, n)]

    def batches(part: tuple[int, int]) -> list[tuple[RankLog, np.ndarray]]:
        rows = slice(*part)
        width = int(log.shown[rows].max())
        return [(RankLog(X=log.X[rows], clicks=log.clicks[rows, :width],
                         propensities=log.propensities[rows, :width], shown=log.shown[rows],
                         candidates=log.candidates[rows]), keys[rows])]

    assert [batches(b)[0][0].slots for b in bounds] == [1, 3, 3]
    for policy in ("uniform", "logging"):
        memory = evaluate_ranking(log, placements(log, policy), RHO0, RHO1, n_boot=BOOT,
                                  keys=keys)
        streamed = evaluate_ranking_parts(bounds, batches, rank_policy(policy),
                                          Options(RHO0, RHO1, n_boot=BOOT))
        assert "slates" not in memory  # the rankings showed different numbers of slots
        same_result(streamed, memory)
        memory = evaluate_ranking(log, placements(log, policy), n_boot=BOOT, keys=keys,
                                  rates=SLOT_RATES)
        streamed = evaluate_ranking_parts(bounds, batches, rank_policy(policy),
                                          Options(n_boot=BOOT, slot_rates=SLOT_RATES))
        same_result(streamed, memory)
        assert memory["correction"]["theta"] == list(SLOT_RATES.theta)
        assert memory["positions"][2]["correction"]["rho0"] == [SLOT_RATES.rho0[2]]
