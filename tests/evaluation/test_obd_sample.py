"""Off-policy estimates on the Open Bandit Dataset's sample logs against observed values.

The ``obp`` source distribution on PyPI ships two 10,000-impression samples
of the Open Bandit Dataset ("all" campaign, 80 items, 3 positions): one
logged by a uniformly random policy, one by Bernoulli Thompson sampling
(BTS), a policy that ignores the user.  Each policy's value is observable in
its own log (the mean click), so evaluating one policy on the *other* log
must give an interval that holds it.  The BTS policy's item-at-position
probabilities are its frequencies in its own log (``empirical:``).  The
archive is fetched with pip at set-up; without the registry the test skips.  The figures
are those of ``bench/results/obd-sample.json`` (the raw output the table of
``docs/evaluation.md`` is rendered from), to the table's four decimals.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from app.bench.doctables import ROOT, interval_text
from tests.commands.test_evaluate import run

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

OBP = "obp==0.4.1"
"""The newest ``obp`` with a source distribution (later releases ship wheels only)."""
FOLDER = "obp-0.4.1/obp/dataset/obd/"


@pytest.fixture(scope="module")
def obd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding ``random/all`` and ``bts/all`` (log and ``item_context.csv``)."""
    target = tmp_path_factory.mktemp("obp")
    try:
        fetched = subprocess.run(
            [sys.executable, "-m", "pip", "download", OBP, "--no-deps", "--no-binary", ":all:",
             "--disable-pip-version-check", "-q", "-d", str(target)],
            capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip download {OBP} timed out: the registry is out of reach")
    archives = list(target.glob("obp-*.tar.gz"))
    if fetched.returncode != 0 or not archives:
        reason = (fetched.stderr.strip().splitlines() or ["no archive"])[-1]
        pytest.skip(f"pip download {OBP} failed ({reason}): the registry is out of reach")
    with tarfile.open(archives[0]) as archive:
        members = [m for m in archive.getmembers()
                   if m.name.startswith((FOLDER + "random/all/", FOLDER + "bts/all/"))
                   and m.name.endswith(".csv")]
        archive.extractall(target, members=members, filter="data")
    return target / FOLDER


def mean_click(path: Path) -> float:
    with path.open(newline="") as f:
        clicks = [float(row["click"]) for row in csv.DictReader(f)]
    return sum(clicks) / len(clicks)


#: The committed raw output of the page's table: its row of each (log, policy of).
RAW = {(row["command"].split("--log ")[1].split("/")[0],
        "random" if "uniform" in row["command"] else "bts"): row
       for row in json.loads((ROOT / "bench/results/obd-sample.json").read_text())["rows"]}


@pytest.mark.parametrize(("evaluated_on", "policy_of"), [("random", "bts"), ("bts", "random")])
def test_a_policy_evaluated_on_the_other_log_holds_its_observed_value(
        obd: Path, capsys: pytest.CaptureFixture[str], evaluated_on: str,
        policy_of: str) -> None:
    own = obd / policy_of / "all" / "all.csv"
    policy = "uniform" if policy_of == "random" else f"empirical:{own}"
    code, result = run(capsys, "--log", str(obd / evaluated_on / "all" / "all.csv"),
                       "--format", "obd", "--policy", policy, "--bootstrap", "1000")
    assert code == 0 and result["n"] == 10_000
    truth = mean_click(own)
    for name in ("ips", "snips", "dr"):
        estimate: dict[str, Any] = result[name]
        assert estimate["ci_low"] <= truth <= estimate["ci_high"], (name, estimate, truth)
    committed = RAW[(evaluated_on, policy_of)]
    assert [interval_text(result[name]) for name in ("ips", "snips", "dr")] == [
        interval_text(committed["result"][name]) for name in ("ips", "snips", "dr")], (
        "bench/results/obd-sample.json is stale: run python bench/results_obd.py")
    assert round(result["ess"]) == round(committed["result"]["ess"])
    assert committed["observed"]["mean"] == truth
