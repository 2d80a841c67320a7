"""The docs' tables made from raw outputs show what their committed raw output renders to
(:mod:`app.bench.doctables`), and each table's markers name the command that makes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.bench import doctables


@pytest.mark.parametrize("table", doctables.TABLES, ids=lambda t: t.name)
def test_doc_table_is_its_raw_output_rendered(table: doctables.DocTable) -> None:
    page = (doctables.ROOT / table.page).read_text(encoding="utf-8")
    assert doctables.in_page(table, page) == doctables.rendered(table), (
        f"{table.page}'s table {table.name} is stale: run python -m app.bench.doctables "
        f"(or {table.command} to measure again)")
    assert f"<!-- table {table.name}: {table.command} ({table.raw}) -->" in page


def test_check_names_a_stale_table_and_update_rewrites_it(tmp_path: Path) -> None:
    table = doctables.TABLES[0]
    for path in (table.page, table.raw):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((doctables.ROOT / path).read_text(encoding="utf-8"))
    page = tmp_path / table.page
    fresh = doctables.rendered(table, tmp_path)
    page.write_text(page.read_text().replace(fresh, fresh.replace("|", "| ", 3)))
    assert doctables.stale_tables(tmp_path, [table]) == [table.name]
    doctables.update(table, tmp_path)
    assert doctables.in_page(table, page.read_text()) == fresh
    assert doctables.stale_tables(tmp_path, [table]) == []
