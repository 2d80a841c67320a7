"""``noisyloop evaluate --engine spark`` (``local[2]``) gives the local engine's numbers on
the same Parquet files."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.commands.log_parquet import write_pages
from app.evaluation.simulate import SOFTMAX, simulate_label
from tests.evaluation.test_parquetlog import evaluate, export_lines, same

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark_master() -> Iterator[str]:
    """``local[2]``, or the test is skipped saying why Spark cannot start here."""
    pytest.importorskip("pyspark", reason="the spark extra (pyspark) is not installed")
    pytest.importorskip("pandas", reason="pyspark's mapInArrow needs pandas")
    if shutil.which("java") is None:
        pytest.skip("no java on the PATH: Spark cannot start")
    from app.evaluation.spark import session, stop_session

    try:
        spark = session("local[2]")
        spark.range(1).collect()
    except Exception as exc:  # any failure to start the JVM or a Python worker
        pytest.skip(f"Spark cannot start here: {exc!r}")
    yield "local[2]"
    stop_session(spark)


def test_spark_equals_the_local_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       spark_master: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_MASTER", spark_master)
    log, _ = simulate_label(4, SOFTMAX, 3_000, 0.05, 0.1)
    pages = export_lines(log)
    write_pages(((page, None) for page in pages[:2]), tmp_path / "a", 0, lambda n: None)
    write_pages(((page, None) for page in pages[2:]), tmp_path / "b", 1, lambda n: None)
    for policy in ("uniform", "fixed:1"):
        local = evaluate(capsys, tmp_path, "--policy", policy)
        spark = evaluate(capsys, tmp_path, "--policy", policy, "--engine", "spark")
        assert spark["n"] == log.n
        same(spark, local)


def test_spark_equals_the_local_engine_on_a_rank_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], spark_master: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every slot's, the slates' and the thin slots' numbers (uniform thins every slot)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.evaluation.test_rank_stream import evaluate as evaluate_rank
    from tests.evaluation.test_rank_stream import export_records, same_result

    monkeypatch.setenv("SPARK_MASTER", spark_master)
    records = export_records(0, 900)
    half = len(records) // 2
    for k, rows in enumerate((records[:half], records[half:])):
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / f"part-{k}.parquet",
                       row_group_size=250)
    for policy in ("uniform", "logging"):
        local = evaluate_rank(capsys, tmp_path, policy)
        spark = evaluate_rank(capsys, tmp_path, policy, "--engine", "spark")
        assert spark["n"] == 900
        same_result(spark, local)
