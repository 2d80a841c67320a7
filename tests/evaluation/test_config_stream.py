"""``noisyloop evaluate --policy config:JSON`` on noisyloop logs streams them in batches
(:mod:`app.evaluation.configrun`): the numbers of the configuration trained and evaluated
on the log in memory, on a JSON Lines and a Parquet export with markers."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.commands.log import write_jsonl
from app.commands.log_parquet import write_pages
from app.evaluation import servicelog
from app.evaluation.configrun import ConfigPlan, evaluate_config
from app.evaluation.estimators import ESTIMATORS, Options, evaluate
from app.evaluation.heavy_tails import MIN_ESS, guard_label
from app.evaluation.shapes import LABEL_SHAPE
from app.evaluation.simulate import SOFTMAX, simulate_label
from app.evaluation.training import config_policy
from tests.evaluation.test_parquetlog import export_lines

CONFIG = {"algorithm": "rcnbf"}  # its learning steps of 100 matter: batches of 170 cut them
FRACTION, RHO0, RHO1, SEED, BOOT = 0.45, 0.05, 0.1, 3, 50


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A label log of 2,000 events as a JSON Lines export (``log.jsonl``) and a Parquet one
    (``export/``), a marker line now and then."""
    folder = tmp_path_factory.mktemp("config")
    log, _ = simulate_label(2, SOFTMAX, 2_000, RHO0, RHO1)
    pages = export_lines(log, marker_every=300)
    write_jsonl(iter(pages), folder / "log.jsonl", lambda n: None)
    write_pages(((page, None) for page in pages), folder / "export", 0, lambda n: None)
    return folder


def in_memory(path: Path) -> dict[str, Any]:
    """The configuration trained and evaluated on the JSON Lines log read whole."""
    read = servicelog.read_label_log(path)
    trained = config_policy(CONFIG, "label", read.label_log(), FRACTION, (RHO0, RHO1), seed=SEED)
    result = evaluate(trained.log, trained.pi, RHO0, RHO1, n_boot=BOOT, seed=SEED).to_dict()
    # its effective sample size is below 100: flagged and widened, streamed or not
    assert result["ess"] < MIN_ESS
    result = guard_label(result, [(trained.log, trained.pi)], Options(RHO0, RHO1))
    return {**result, "split": trained.split(read.stream_ids)}


def command(capsys: pytest.CaptureFixture[str], log: Path, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["evaluate", "--no-progress", "--log", str(log), "--format", "noisyloop",
                 "--policy", "config:" + json.dumps(CONFIG), "--rho0", str(RHO0), "--rho1",
                 str(RHO1), "--seed", str(SEED), "--bootstrap", str(BOOT), *args])
    captured = capsys.readouterr()
    return code, captured.out if code == 0 else captured.err


def same(streamed: dict[str, Any], memory: dict[str, Any]) -> None:
    assert streamed["n"] == memory["n"] == 1_100
    assert streamed["ess"] == pytest.approx(memory["ess"], rel=1e-9)
    for name in ESTIMATORS:
        for field in ("value", "ci_low", "ci_high"):
            assert streamed[name][field] == pytest.approx(memory[name][field], rel=1e-9), name
    assert streamed["split"] == memory["split"]
    assert streamed["insufficient_data"] is memory["insufficient_data"] is True


def test_config_on_json_lines_and_parquet_streams_the_numbers_of_the_log_in_memory(
        exports: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from app.evaluation import parquetlog

    pytest.importorskip("pyarrow")
    memory = in_memory(exports / "log.jsonl")
    assert memory["split"]["train"] == {"events": 900, "rows": [0, 899],
                                        "stream_ids": ["0-0", "899-0"]}
    monkeypatch.setattr(parquetlog, "BATCH_ROWS", 170)
    for log in (exports / "log.jsonl", exports / "export"):
        code, out = command(capsys, log, "--train-fraction", str(FRACTION))
        assert code == 0, out
        result = json.loads(out)
        same(result, memory)
        assert result["train_fraction"] == FRACTION and result["policy"].startswith("config:")
    # JSON Lines in batches of 170 lines: the learning steps cut, the same numbers
    events, labels = servicelog.label_counts(exports / "log.jsonl")
    plan = ConfigPlan.of(CONFIG, "label", labels, Options(RHO0, RHO1, n_boot=BOOT, seed=SEED),
                         events, FRACTION, shape=LABEL_SHAPE)
    same(evaluate_config(plan, partial(servicelog.identified_batches, exports / "log.jsonl",
                                       labels, 170)), memory)


@pytest.mark.parametrize(("args", "words"), [
    (("--train-fraction", "1.0"), ["--train-fraction", "(0, 1)"]),
    (("--train-fraction", "0.0001"), ["--train-fraction", "cannot be split"]),
    (("--rho1", "0.96"), ["rho"]),
])
def test_config_refuses_a_split_or_rates_it_cannot_use_naming_the_option(
        exports: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
        words: list[str]) -> None:
    code, err = command(capsys, exports / "log.jsonl", *args)
    assert code == 2 and all(word in err for word in words), err


def test_config_refuses_bad_json_a_rank_log_and_workers_naming_the_option(
        exports: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["evaluate", "--no-progress", "--format", "noisyloop"]
    assert main([*base, "--log", str(exports / "log.jsonl"), "--policy", "config:{"]) == 2
    assert "--policy: config:JSON is not JSON" in capsys.readouterr().err
    ranks = tmp_path / "ranks.jsonl"
    ranks.write_text(json.dumps({"type": "event", "features": [1.0], "n_candidates": 3,
                                 "slots": [{"slot": 0, "propensity": 0.5, "click": 1}]}) + "\n")
    assert main([*base, "--log", str(ranks), "--policy", "config:{}"]) == 2
    assert "--policy: config:JSON needs a label log" in capsys.readouterr().err
    pytest.importorskip("pyarrow")
    assert main([*base, "--log", str(exports / "export"), "--policy", "config:{}",
                 "--workers", "2"]) == 2
    assert "--workers and --engine: config:JSON runs in one process" in \
        capsys.readouterr().err
