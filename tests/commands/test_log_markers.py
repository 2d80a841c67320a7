"""Every marker type a decision log can hold, written by the service, exported as JSON Lines
and as Parquet, read back, and evaluated alike from both."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.commands.log import write_jsonl
from app.commands.log_parquet import DETAIL, MARKER_COLUMNS, write_pages
from app.store.decisionlog import MARKER_TYPES
from tests.api.conftest import (
    TestClient,
    client,  # noqa: F401 (the fixture)
    new_model,
    new_tenant,
)
from tests.api.test_drift import _answer
from tests.evaluation.test_parquetlog import evaluate, same

pq = pytest.importorskip("pyarrow.parquet")

ROOT = Path(__file__).resolve().parents[2]


def _pages(api: TestClient, auth: dict[str, str]) -> Iterator[tuple[bytes, str | None]]:
    """The log's pages (of 500 lines), each with the position after it."""
    after: str | None = None
    while True:
        r = api.get("/v1/models/m1/log", headers=auth,
                    params={"limit": 500, **({} if after is None else {"after": after})})
        assert r.status_code == 200, r.text
        after = r.headers.get("X-Next-After")
        yield r.content, after
        if after is None:
            return


def _exported_markers(out: Path) -> list[dict[str, Any]]:
    """The marker lines of a Parquet export as the service wrote them."""
    rows = [row for path in sorted(out.rglob("*.parquet"))
            for row in pq.read_table(path, partitioning=None).to_pylist()]
    return [{**json.loads(row[DETAIL]), **{name: row[name] for name in MARKER_COLUMNS}}
            for row in rows if row["type"] != "event"]


def _markers(api: TestClient, auth: dict[str, str]) -> None:
    """Drive the model through a drift (and its recovery), a promotion of a challenger
    without params, a rollback and a reset: one marker of each type."""
    r = api.post("/v1/models/m1/challengers", headers=auth,
                 json={"name": "c", "algorithm": "linucb_diag", "params": {}})
    assert r.status_code == 201, r.text
    rng = np.random.default_rng(0)
    _answer(api, auth, 600, 0.9, rng)
    _answer(api, auth, 600, 0.05, rng)
    r = api.post("/v1/models/m1/promote", json={"challenger": "c"}, headers=auth)
    assert r.status_code == 200, r.text
    _answer(api, auth, 200, 0.5, rng)
    r = api.post("/v1/models/m1/rollback", json={"version": 1}, headers=auth)
    assert r.status_code == 200, r.text
    _answer(api, auth, 200, 0.5, rng)
    assert api.post("/v1/models/m1/reset", headers=auth).status_code == 200
    _answer(api, auth, 200, 0.5, rng)


def test_marker_types_hold_every_marker_the_code_writes_and_the_docs_list_them() -> None:
    lua = "".join(p.read_text() for p in (ROOT / "app" / "store" / "lua").glob("*.lua"))
    python = "".join(p.read_text() for folder in ("app", "workers")
                     for p in (ROOT / folder).rglob("*.py"))
    written = {*re.findall(r"log_marker\([^)]*?'(\w+)'", lua),
               *re.findall(r'_MARKER = "(\w+)"', python),
               *re.findall(r'marker="(\w+)"', python)}
    assert written == set(MARKER_TYPES)
    table = (ROOT / "docs" / "api.md").read_text().split("| marker `type` |", 1)[1]
    listed = re.findall(r"^\| `(\w+)` \|", table.split("\n\n", 1)[0], re.MULTILINE)
    assert listed == list(MARKER_TYPES)


@pytest.mark.slow  # a service with its trainer, fed a change its detector sees
def test_every_marker_round_trips_through_both_exports_and_evaluate(
        client: TestClient, tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    auth = new_tenant(client)
    new_model(client, auth)  # drift.action: recover (the default)
    _markers(client, auth)
    pages = list(_pages(client, auth))
    lines = [json.loads(line) for page, _ in pages for line in page.splitlines()]
    markers = [line for line in lines if line["type"] != "event"]
    assert {m["type"] for m in markers} == set(MARKER_TYPES), markers
    assert {"action": "recover"}.items() <= next(
        m for m in markers if m["type"] == "drift").items()  # the field events have as a label
    write_jsonl((page for page, _ in pages), tmp_path / "log.jsonl", lambda n: None)
    out = tmp_path / "export"
    assert write_pages(iter(pages), out, 0, lambda n: None) == len(lines)
    assert pq.read_table(out).column("stream_id").to_pylist() == [
        line["stream_id"] for line in lines]
    assert _exported_markers(out) == markers  # every marker line as served, detail and all
    for policy in ("uniform", "logging", "fixed:1"):
        from_parquet = evaluate(capsys, out, "--policy", policy)
        assert from_parquet["n"] == len(lines) - len(markers)
        same(from_parquet, evaluate(capsys, tmp_path / "log.jsonl", "--policy", policy))
