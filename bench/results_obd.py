"""The Open Bandit Dataset check of ``docs/evaluation.md``: its commands run, their raw
output kept, the page's table written from it.

The ``obp`` 0.4.1 source distribution ships two 10,000-impression samples of the Open
Bandit Dataset (campaign "all"), logged by a uniform policy and by Bernoulli Thompson
sampling.  Each policy is evaluated on the other's log with the commands the page shows
(run in the archive's ``obp/dataset/obd`` folder), and its observed value is the mean
click of its own log.  Writes ``bench/results/obd-sample.json`` and the table
``obd-sample`` of the page (:mod:`app.bench.doctables`); ``tests/test_docs.py`` checks the
page against the JSON, ``tests/evaluation/test_obd_sample.py`` the JSON against fresh runs.

    .venv/bin/python bench/results_obd.py              # fetches the archive with pip
    .venv/bin/python bench/results_obd.py --obd DIR    # DIR: an unpacked obp/dataset/obd
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import orjson

from app.bench.doctables import ROOT, TABLES, update
from app.bench.results import write_results

OBP = "obp==0.4.1"
FOLDER = "obp-0.4.1/obp/dataset/obd"
#: Each row: its label, the log evaluated, the policy, the log whose mean click is its value.
ROWS = (("BTS on the random log", "random/all/all.csv", "empirical:bts/all/all.csv",
         "bts/all/all.csv"),
        ("uniform on the BTS log", "bts/all/all.csv", "uniform", "random/all/all.csv"))
RAW = ROOT / "bench" / "results" / "obd-sample.json"


def command(log: str, policy: str) -> list[str]:
    """The page's command evaluating ``policy`` on ``log``."""
    return ["noisyloop", "evaluate", "--log", log, "--format", "obd", "--policy", policy,
            "--bootstrap", "1000"]


def fetch(target: Path) -> Path:
    """Download and unpack the archive's two sample folders into ``target``."""
    subprocess.run([sys.executable, "-m", "pip", "download", OBP, "--no-deps", "--no-binary",
                    ":all:", "--disable-pip-version-check", "-q", "-d", str(target)],
                   check=True, timeout=300)
    with tarfile.open(next(target.glob("obp-*.tar.gz"))) as archive:
        archive.extractall(target, members=[m for m in archive.getmembers()
                                            if m.name.startswith(FOLDER)], filter="data")
    return target / FOLDER


def observed(path: Path) -> dict[str, Any]:
    """The mean click of a log, with its clicks and rows."""
    with path.open(newline="") as f:
        clicks = [int(float(row["click"])) for row in csv.DictReader(f)]
    return {"mean": sum(clicks) / len(clicks), "clicks": sum(clicks), "n": len(clicks)}


def measure(obd: Path) -> dict[str, Any]:
    """The raw output: each row's command, its result and the observed value."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    rows = []
    for label, log, policy, own in ROWS:
        args = command(log, policy)
        done = subprocess.run([sys.executable, "-m", "app.cli", *args[1:], "--no-progress"],
                              cwd=obd, env=env, capture_output=True, text=True, check=True)
        result = orjson.loads(done.stdout)
        rows.append({"label": label, "command": shlex.join(args),
                     "result": {k: result[k] for k in ("ips", "snips", "dr", "ess", "n")},
                     "observed": observed(obd / own)})
    return {"source": f"{OBP} source distribution, {FOLDER}", "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--obd", type=Path, default=None,
                        help="an unpacked obp/dataset/obd folder (default: fetch it with pip)")
    args = parser.parse_args()
    if args.obd is not None:
        raw = measure(args.obd)
    else:
        with tempfile.TemporaryDirectory(prefix="obp-") as tmp:
            raw = measure(fetch(Path(tmp)))
    write_results(RAW, raw)
    update(next(t for t in TABLES if t.name == "obd-sample"))


if __name__ == "__main__":
    main()
