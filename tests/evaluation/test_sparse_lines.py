"""``noisyloop evaluate`` reads the log's sparse form of a context (``{"size", "indices",
"values"}``) as the dense list it stands for, from JSON Lines and from a Parquet export, also
when a page mixes both forms."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.commands.log import write_jsonl
from app.commands.log_parquet import one_features_form, write_pages
from app.evaluation.servicelog import dense_vector
from app.evaluation.simulate import SOFTMAX, simulate_label
from tests.evaluation.test_parquetlog import evaluate, export_lines, same

pytest.importorskip("pyarrow")


def sparse_form(features: list[float]) -> dict[str, object]:
    indices = [i for i, v in enumerate(features) if v != 0]
    return {"size": len(features), "indices": indices, "values": [features[i] for i in indices]}


def sparse_pages(pages: list[bytes], every: int) -> list[bytes]:
    """The pages with every ``every``-th event line's features in the sparse form."""
    out = []
    for page in pages:
        lines = []
        for k, raw in enumerate(page.splitlines()):
            line = json.loads(raw)
            if line["type"] == "event" and k % every == 0:
                line["features"] = sparse_form(line["features"])
            lines.append(json.dumps(line).encode() + b"\n")
        out.append(b"".join(lines))
    return out


def test_dense_vector_reads_both_forms_and_refuses_an_index_out_of_range() -> None:
    assert dense_vector([1, 0, 2]).tolist() == [1.0, 0.0, 2.0]
    assert dense_vector(sparse_form([1.0, 0.0, 2.0])).tolist() == [1.0, 0.0, 2.0]
    with pytest.raises(ValueError, match="outside"):
        dense_vector({"size": 2, "indices": [2], "values": [1.0]})


def test_a_mixed_page_is_written_in_one_form() -> None:
    page = b'{"type":"event","features":[0,1.5]}\n{"type":"event","features":' \
        b'{"size":2,"indices":[0],"values":[3.0]}}\n'
    rows = [json.loads(line) for line in one_features_form(page).splitlines()]
    assert [row["features"] for row in rows] == [
        {"size": 2, "indices": [1], "values": [1.5]}, {"size": 2, "indices": [0],
                                                       "values": [3.0]}]
    dense = b'{"type":"event","features":[0,1.5]}\n'
    assert one_features_form(dense) is dense  # a dense model's page is kept as it is


@pytest.mark.parametrize("every", [1, 3])
def test_evaluate_reads_sparse_lines_as_their_dense_lists(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], every: int) -> None:
    log, _ = simulate_label(0, SOFTMAX, 2_000, 0.05, 0.1)
    log = log.rows(slice(None))
    X = log.X.copy()
    X[np.abs(X) < 0.5] = 0.0  # contexts with zeros, as a sparse model's are
    log = type(log)(X=X, actions=log.actions, propensities=log.propensities,
                    rewards=log.rewards, n_actions=log.n_actions)
    pages = export_lines(log)
    write_jsonl(iter(pages), tmp_path / "dense.jsonl", lambda n: None)
    sparse = sparse_pages(pages, every)
    write_jsonl(iter(sparse), tmp_path / "sparse.jsonl", lambda n: None)
    write_pages(((page, None) for page in sparse), tmp_path / "export", 0, lambda n: None)
    (file,) = (tmp_path / "export").rglob("*.parquet")
    for policy in ("uniform", "fixed:1"):
        reference = evaluate(capsys, tmp_path / "dense.jsonl", "--policy", policy)
        assert reference["n"] == log.n
        same(evaluate(capsys, tmp_path / "sparse.jsonl", "--policy", policy), reference)
        same(evaluate(capsys, file, "--policy", policy), reference)


def test_a_dense_page_then_sparse_pages_make_files_of_two_schemas_read_as_one_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, _ = simulate_label(2, SOFTMAX, 2_500, 0.05, 0.1)
    pages = export_lines(log)
    write_jsonl(iter(pages), tmp_path / "dense.jsonl", lambda n: None)
    mixed = [pages[0], *sparse_pages(pages[1:], 1)]
    write_pages(((page, None) for page in mixed), tmp_path / "export", 0, lambda n: None)
    files = sorted((tmp_path / "export").rglob("*.parquet"))
    assert len(files) == 2  # a file per schema: list<double> features, then structs
    reference = evaluate(capsys, tmp_path / "dense.jsonl", "--policy", "uniform")
    same(evaluate(capsys, tmp_path / "export", "--policy", "uniform"), reference)
