"""``noisyloop evaluate`` on Parquet exports: streamed in batches, over processes, the same
numbers as the JSON Lines export of the same log read in memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.cli import main
from app.commands.log import write_jsonl
from app.commands.log_parquet import write_pages
from app.evaluation.estimators import ESTIMATORS, LabelLog
from app.evaluation.simulate import SOFTMAX, simulate_label

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def export_lines(log: LabelLog, first: int = 0, marker_every: int = 700) -> list[bytes]:
    """The JSON Lines a label model's `noisyloop log export` holds for ``log`` (a marker
    line now and then), as pages of 1,000 lines."""
    lines = []
    for i in range(log.n):
        if i % marker_every == 3:
            lines.append({"type": "rollback", "stream_id": f"{first + i}-1", "time": "t"})
        lines.append({"type": "event", "stream_id": f"{first + i}-0", "time": "t",
                      "features": log.X[i].tolist(), "action": int(log.actions[i]),
                      "propensity": float(log.propensities[i]), "greedy_action": 0,
                      "feedback": {"click": float(log.rewards[i])}})
    encoded = [json.dumps(line).encode() + b"\n" for line in lines]
    return [b"".join(encoded[i:i + 1000]) for i in range(0, len(encoded), 1000)]


def evaluate(capsys: pytest.CaptureFixture[str], log: Path, *args: str) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["evaluate", "--no-progress", "--log", str(log), "--format", "noisyloop",
                 "--bootstrap", "100", "--rho0", "0.05", "--rho1", "0.1", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result: dict[str, Any] = json.loads(captured.out)
    return result


def same(a: dict[str, Any], b: dict[str, Any], fields: tuple[str, ...] = ("value", "ci_low",
                                                                            "ci_high")) -> None:
    assert a["n"] == b["n"]
    for name in ESTIMATORS:
        for field in fields:
            assert a[name][field] == pytest.approx(b[name][field], rel=1e-9), (name, field)


def test_evaluate_reads_the_parquet_export_as_its_json_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, _ = simulate_label(0, SOFTMAX, 3_000, 0.05, 0.1)
    pages = export_lines(log)
    write_jsonl(iter(pages), tmp_path / "log.jsonl", lambda n: None)
    write_pages(((page, None) for page in pages), tmp_path / "export", 0, lambda n: None)
    (file,) = (tmp_path / "export").rglob("*.parquet")
    for policy in ("uniform", "logging", "fixed:2"):
        memory = evaluate(capsys, tmp_path / "log.jsonl", "--policy", policy)
        streamed = evaluate(capsys, file, "--policy", policy)
        assert streamed["n"] == log.n
        same(streamed, memory)


@pytest.mark.slow
def test_a_directory_of_files_over_two_workers_is_the_same_as_in_memory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from app.evaluation import parquetlog

    monkeypatch.setattr(parquetlog, "BATCH_ROWS", 500)
    log, _ = simulate_label(1, SOFTMAX, 4_000)
    (tmp_path / "logs").mkdir()
    all_pages = []
    for k, rows in enumerate((slice(0, 2_500), slice(2_500, 4_000))):
        pages = export_lines(log.rows(rows), first=rows.start or 0)
        table = pa.Table.from_pylist([json.loads(line) for page in pages
                                      for line in page.splitlines()])
        pq.write_table(table, tmp_path / "logs" / f"part-{k}.parquet", row_group_size=700)
        all_pages += pages
    write_jsonl(iter(all_pages), tmp_path / "log.jsonl", lambda n: None)
    memory = evaluate(capsys, tmp_path / "log.jsonl", "--policy", "uniform")
    one = evaluate(capsys, tmp_path / "logs", "--policy", "uniform")
    two = evaluate(capsys, tmp_path / "logs", "--policy", "uniform", "--workers", "2")
    globbed = evaluate(capsys, str(tmp_path / "logs" / "*.parquet"), "--policy", "uniform")
    for streamed in (one, two, globbed):
        same(streamed, memory)
        assert np.isclose(streamed["ess"], memory["ess"], rtol=1e-9)


def test_parquet_that_is_not_a_label_export_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "x.parquet")
    assert main(["evaluate", "--no-progress", "--log", str(tmp_path / "x.parquet"),
                 "--format", "noisyloop", "--policy", "uniform"]) == 2
    assert "is it a `noisyloop log export` file?" in capsys.readouterr().err
    assert main(["evaluate", "--no-progress", "--log", str(tmp_path / "none" / "*.parquet"),
                 "--format", "noisyloop", "--policy", "uniform"]) == 2
    assert "no Parquet files" in capsys.readouterr().err
