"""The docs' tables made from a benchmark's raw output, kept in step with it.

A generated table sits in its page between two markers naming it and the command that
made its raw output::

    <!-- table obd-sample: python bench/results_obd.py (bench/results/obd-sample.json) -->
    |...|
    <!-- /table obd-sample -->

:data:`TABLES` lists each table: its page, its raw output (committed under
``bench/results/``) and the function that renders the Markdown from it.  The script that
measures writes the raw output and then the table (:func:`update`); a test renders every
table from its committed raw output and compares it with the page (:func:`stale_tables`), and
the slow test of a measurement that is cheap to repeat compares its fresh numbers with the
committed raw output, so neither the page nor the raw output can drift from the code.

Usage::

    python -m app.bench.doctables          # rewrite every table from its raw output
    python -m app.bench.doctables --check  # exit 1 naming each stale table
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class DocTable:
    """One generated table: where it goes, what it is made from, how."""

    name: str
    page: str
    """The page, relative to the repository root."""
    raw: str
    """The raw output it is rendered from, relative to the repository root."""
    command: str
    """The command that writes the raw output (and the table)."""
    render: Callable[[dict[str, Any]], str]


def interval_text(estimate: dict[str, float]) -> str:
    """An estimate and its interval as the tables give them: ``value (low, high)``."""
    return f"{estimate['value']:.4f} ({estimate['ci_low']:.4f}, {estimate['ci_high']:.4f})"


def obd_sample(raw: dict[str, Any]) -> str:
    """The Open Bandit Dataset check of ``docs/evaluation.md``: each policy evaluated on the
    other policy's log (IPS, SNIPS, DR with their intervals, ESS) and its observed value."""
    lines = ["|policy, evaluated on|IPS (95% interval)|SNIPS|DR|ESS|observed in its own log|",
             "|---|---|---|---|---|---|"]
    for row in raw["rows"]:
        result, observed = row["result"], row["observed"]
        lines.append(f"|{row['label']}|{interval_text(result['ips'])}|{interval_text(result['snips'])}|"
                     f"{interval_text(result['dr'])}|{result['ess']:,.0f}|"
                     f"{observed['mean']:.4f} ({observed['clicks']} clicks)|")
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "never (90 s)" if value is None else f"{value:.1f} s"


def kafka_join(raw: dict[str, Any]) -> str:
    """The group-join waits of ``docs/production.md`` under each set of consumer properties
    (``bench/bench_kafka_join.py``)."""
    lines = ["| consumer properties | first join | rejoin after a close | rejoin after a crash |",
             "| --- | --- | --- | --- |"]
    for name, found in raw["results"].items():
        given = found["properties"] or raw["config"]["consumer_defaults"]
        props = ", ".join(f"`{k}` {v}" for k, v in given.items())
        lines.append(f"| {name.replace('_', ' ')} ({props}) | {_seconds(found['first_join'])} "
                     f"| {_seconds(found['rejoin_after_close'])} "
                     f"| {_seconds(found['rejoin_after_kill'])} |")
    return "\n".join(lines)


TABLES = (
    DocTable("obd-sample", "docs/evaluation.md", "bench/results/obd-sample.json",
             "python bench/results_obd.py", obd_sample),
    DocTable("kafka-join", "docs/production.md", "bench/results/kafka-join.json",
             "python bench/bench_kafka_join.py --json bench/results/kafka-join.json",
             kafka_join),
)


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- table {re.escape(name)}: [^\n]*-->\n)(.*?)\n(<!-- /table "
                      rf"{re.escape(name)} -->)", re.DOTALL)


def marked(table: DocTable, body: str) -> str:
    """``body`` between ``table``'s markers."""
    return (f"<!-- table {table.name}: {table.command} ({table.raw}) -->\n{body}\n"
            f"<!-- /table {table.name} -->")


def in_page(table: DocTable, page: str) -> str:
    """The body of ``table`` in ``page`` (ValueError when its markers are missing)."""
    found = _block(table.name).search(page)
    if found is None:
        raise ValueError(f"{table.page} has no table {table.name!r} (its markers are missing)")
    return found.group(2)


def rendered(table: DocTable, root: Path = ROOT) -> str:
    """``table`` rendered from its committed raw output."""
    return table.render(json.loads((root / table.raw).read_text(encoding="utf-8")))


def stale_tables(root: Path = ROOT, tables: Sequence[DocTable] = TABLES) -> list[str]:
    """The names of the ``tables`` whose page does not show what their raw output renders
    to."""
    return [t.name for t in tables
            if in_page(t, (root / t.page).read_text(encoding="utf-8")) != rendered(t, root)]


def update(table: DocTable, root: Path = ROOT) -> None:
    """Rewrite ``table`` in its page from its raw output."""
    path = root / table.page
    page = path.read_text(encoding="utf-8")
    in_page(table, page)
    path.write_text(_block(table.name).sub(lambda m: marked(table, rendered(table, root)),
                                           page, count=1), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="rewrite (or --check) the docs' tables made "
                                                 "from raw outputs")
    parser.add_argument("--check", action="store_true", help="exit 1 if a table is stale")
    args = parser.parse_args(argv)
    if args.check:
        found = stale_tables()
        for name in found:
            sys.stderr.write(f"table {name} is stale: run python -m app.bench.doctables\n")
        return 1 if found else 0
    for table in TABLES:
        update(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
