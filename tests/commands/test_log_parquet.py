"""The Parquet export written as pages arrive: partitioned by day, resumable, and read by
``noisyloop evaluate`` as the JSON Lines export of the same pages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.commands import log_parquet
from app.commands.log import write_jsonl
from app.evaluation.simulate import SOFTMAX, simulate_label
from tests.evaluation.test_parquetlog import evaluate, export_lines, same

pq = pytest.importorskip("pyarrow.parquet")


def dated(pages: list[bytes]) -> list[bytes]:
    """The pages with each line's time on one of two days (the first half on the first)."""
    lines = [json.loads(line) for page in pages for line in page.splitlines()]
    for i, line in enumerate(lines):
        line["time"] = f"2026-11-{26 + 2 * i // len(lines)}T10:00:00.000+00:00"
    encoded = [json.dumps(line).encode() + b"\n" for line in lines]
    return [b"".join(encoded[i:i + 1000]) for i in range(0, len(encoded), 1000)]


def positioned(pages: list[bytes], start: int = 0, stop: int | None = None
               ) -> Iterator[tuple[bytes, str | None]]:
    """Pages ``start .. stop - 1`` with the position after each (None after the last)."""
    for k in range(start, len(pages) if stop is None else stop):
        yield pages[k], (f"{k}-0" if k + 1 < len(pages) else None)


def test_export_writes_days_and_evaluate_reads_them_as_the_json_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_parquet, "ROW_GROUP", 1_500)
    monkeypatch.setattr(log_parquet, "FILE_ROWS", 3_000)
    log, _ = simulate_label(2, SOFTMAX, 8_000)
    pages = dated(export_lines(log))
    write_jsonl(iter(pages), tmp_path / "log.jsonl", lambda n: None)
    out = tmp_path / "export"
    rows = log_parquet.write_pages(positioned(pages), out, 0, lambda n: None)
    assert rows == sum(page.count(b"\n") for page in pages)
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet"))
    assert files[0].startswith("day=2026-11-26/") and files[-1].startswith("day=2026-11-27/")
    assert len(files) >= 4 and not list(out.rglob("*.tmp"))
    table = pq.read_table(out)
    assert table.column("stream_id").to_pylist() == [
        json.loads(line)["stream_id"] for page in pages for line in page.splitlines()]
    for policy in ("uniform", "fixed:1"):
        same(evaluate(capsys, out, "--policy", policy),
             evaluate(capsys, tmp_path / "log.jsonl", "--policy", policy))


def test_an_interrupted_export_resumes_where_it_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_parquet, "ROW_GROUP", 1_000)
    monkeypatch.setattr(log_parquet, "FILE_ROWS", 2_000)
    log, _ = simulate_label(3, SOFTMAX, 6_000)
    pages = dated(export_lines(log))
    out = tmp_path / "export"

    def interrupted() -> Iterator[tuple[bytes, str | None]]:
        yield from positioned(pages, 0, 3)
        raise ConnectionError("the service went away")

    with pytest.raises(ConnectionError):
        log_parquet.write_pages(interrupted(), out, 0, lambda n: None)
    after, next_part = log_parquet.resume_position(out)
    assert after is not None and not list(out.rglob("*.tmp"))
    resumed = int(after.split("-")[0]) + 1
    log_parquet.write_pages(positioned(pages, resumed), out, next_part, lambda n: None)
    table = pq.read_table(out)
    assert table.column("stream_id").to_pylist() == [
        json.loads(line)["stream_id"] for page in pages for line in page.splitlines()]
    with pytest.raises(ValueError, match="read the whole log"):
        log_parquet.resume_position(out)
