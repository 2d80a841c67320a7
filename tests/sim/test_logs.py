"""Readers of logged ranking data (VW ADF text, Open Bandit Dataset CSV) on generated files."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from app.sim.logs import FeatureIndex, read_obd, read_obd_items, read_vw_adf


def _row(prefix: str, values: np.ndarray) -> str:
    return prefix + " ".join(f"{j}:{v:.17g}" for j, v in enumerate(values.tolist()))


def test_vw_adf_round_trips_generated_examples(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    contexts = rng.normal(size=(5, 4))
    actions = [rng.normal(size=(n, 3)) for n in (2, 5, 3, 4, 2)]
    logged = [int(rng.integers(len(a))) for a in actions]
    lines = []
    for t, (x, A) in enumerate(zip(contexts, actions, strict=True)):
        lines.append(_row("shared |s ", x))
        for k, a in enumerate(A):
            label = f"0:{t / 10}:{0.5 if k else 0.25} " if k == logged[t] else ""
            lines.append(_row(label + "|a ", a))
        lines.append("")
    path = tmp_path / "log.vw"
    path.write_text("\n".join(lines), "utf-8")  # no blank line after the last example

    examples = list(read_vw_adf(path))
    assert len(examples) == 5
    shared = FeatureIndex(f"s^{j}" for j in range(4))
    action = FeatureIndex(f"a^{j}" for j in range(3))
    np.testing.assert_array_equal(shared.dense(e.shared for e in examples), contexts)
    for t, e in enumerate(examples):
        np.testing.assert_array_equal(action.dense(e.actions), actions[t])
        assert e.logged == logged[t]
        assert e.cost == pytest.approx(t / 10)
        assert e.probability == (0.5 if logged[t] else 0.25)


def test_vw_adf_features_without_values_default_namespace_and_no_label(tmp_path: Path) -> None:
    path = tmp_path / "log.vw"
    path.write_text("shared | age:0.5 young |u city=paris\n|i sports\n|i news:2 news\n\n",
                    "utf-8")
    (e,) = read_vw_adf(path)
    assert e.shared == {"age": 0.5, "young": 1.0, "u^city=paris": 1.0}
    assert e.actions == [{"i^sports": 1.0}, {"i^news": 3.0}]
    assert e.logged is None and e.cost is None and e.probability is None


@pytest.mark.parametrize(("text", "message"), [
    ("shared |s a\n0:1 |a b\n", "log.vw:2: label"),
    ("shared |s a\n0:1:0 |a b\n", "log.vw:2: probability"),
    ("|a b\nshared |s a\n", "log.vw:2: a shared line"),
    ("shared |s a\n0:1:0.5 |a b\n0:0:0.5 |a c\n", "log.vw:3: a second labelled"),
    ("shared |s a\n\n|a b:x\n", "log.vw:1: an example without actions"),
])
def test_vw_adf_bad_input_names_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "log.vw"
    path.write_text(text, "utf-8")
    with pytest.raises(ValueError, match=message):
        list(read_vw_adf(path))


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["", *header])  # the dataset's files start with a pandas index column
        writer.writerows([i, *row] for i, row in enumerate(rows))


def test_open_bandit_dataset_layout(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    header = ["timestamp", "item_id", "position", "click", "propensity_score",
              "user_feature_0", "user_feature_1", "user-item_affinity_0",
              "user-item_affinity_1"]
    rows: list[list[object]] = []
    for t in range(6):
        rows.append([f"2019-11-24 00:00:0{t}", t % 2, t % 3 + 1, int(t == 4), 0.25 + t / 100,
                     rng.choice(["81ce123cbb5bd8d6", "2723d2eb8bba04e0"]),
                     "cef3390ed299c09a", round(float(rng.random()), 6), 0.0])
    _write_csv(tmp_path / "all.csv", header, rows)
    _write_csv(tmp_path / "item_context.csv", ["item_id", "item_feature_0", "item_feature_1"],
               [[0, -0.5, "a3b8"], [1, 0.25, "e9d1"]])

    records = list(read_obd(tmp_path / "all.csv"))
    assert [r.position for r in records] == [0, 1, 2, 0, 1, 2]
    assert [r.item_id for r in records] == [0, 1, 0, 1, 0, 1]
    assert [r.click for r in records] == [0, 0, 0, 0, 1, 0]
    assert records[3].propensity == pytest.approx(0.28)
    for r, row in zip(records, rows, strict=True):
        assert r.context == {f"user_feature_0={row[5]}": 1.0,
                             "user_feature_1=cef3390ed299c09a": 1.0,
                             "user-item_affinity_0": row[7], "user-item_affinity_1": 0.0}
    items = read_obd_items(tmp_path / "item_context.csv")
    assert items == {0: {"item_feature_0": -0.5, "item_feature_1=a3b8": 1.0},
                     1: {"item_feature_0": 0.25, "item_feature_1=e9d1": 1.0}}
    index = FeatureIndex()
    index.add(name for r in records for name in r.context)
    X = index.dense(r.context for r in records)
    assert X.shape == (6, len(index.columns)) and X.sum(axis=1).min() >= 2.0


def test_open_bandit_dataset_missing_columns(tmp_path: Path) -> None:
    _write_csv(tmp_path / "all.csv", ["item_id", "position", "click"], [[0, 1, 0]])
    with pytest.raises(ValueError, match=r"missing columns \['propensity_score'\]"):
        list(read_obd(tmp_path / "all.csv"))
    _write_csv(tmp_path / "items.csv", ["item_feature_0"], [[0.5]])
    with pytest.raises(ValueError, match="no item_id column"):
        read_obd_items(tmp_path / "items.csv")
