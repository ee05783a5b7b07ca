"""SQLite records tools: typed query/insert/update, parametrized SQL only."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pydantic
import pytest

from agentflow.tool import Tool
from agentflow.tools import RecordNotFoundError, ToolConfigError, record_tools


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE tickets (id INTEGER PRIMARY KEY, customer TEXT NOT NULL,"
            " status TEXT NOT NULL DEFAULT 'open', priority INTEGER, urgent BOOLEAN, amount REAL)"
        )
        conn.executemany(
            "INSERT INTO tickets (customer, status, priority) VALUES (?, ?, ?)",
            [("ada", "open", 1), ("bob", "closed", 2), ("ada", "closed", 3)],
        )
    return path


@pytest.fixture
def tools(db: Path) -> dict[str, Tool]:
    return {t.name: t for t in record_tools(db, "tickets", max_rows=10)}


def call(tool: Tool, **arguments: Any) -> Any:
    return anyio.run(tool.invoke, arguments)


def test_schemas_are_typed_from_the_table(tools: dict[str, Tool]) -> None:
    assert list(tools) == ["query_tickets", "insert_tickets", "update_tickets"]
    insert = tools["insert_tickets"].parameters
    assert insert["required"] == ["customer"]
    assert insert["properties"]["customer"]["type"] == "string"
    update = tools["update_tickets"].parameters
    assert update["required"] == ["id"] and update["properties"]["id"]["type"] == "integer"
    query_props = tools["query_tickets"].parameters["properties"]
    assert {"type": "number"} in query_props["amount"]["anyOf"]
    assert {"type": "boolean"} in query_props["urgent"]["anyOf"]


def test_query_filters_and_limits(tools: dict[str, Tool]) -> None:
    result = call(tools["query_tickets"], customer="ada")
    assert [r["id"] for r in result["rows"]] == [1, 3] and result["more"] is False
    result = call(tools["query_tickets"], customer="ada", status="closed")
    assert [r["id"] for r in result["rows"]] == [3]
    result = call(tools["query_tickets"], limit=2)
    assert len(result["rows"]) == 2 and result["more"] is True
    with pytest.raises(ValueError, match="between 1 and 10"):
        call(tools["query_tickets"], limit=11)


def test_insert_then_update(tools: dict[str, Tool], db: Path) -> None:
    row = call(tools["insert_tickets"], customer="cy", priority=5)
    assert row["id"] == 4 and row["status"] == "open" and row["priority"] == 5
    updated = call(tools["update_tickets"], id=4, status="closed")
    assert updated["status"] == "closed" and updated["customer"] == "cy"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM tickets WHERE id = 4").fetchone() == ("closed",)


def test_update_of_a_missing_row_and_empty_update(tools: dict[str, Tool]) -> None:
    with pytest.raises(RecordNotFoundError, match="no tickets row with id = 99"):
        call(tools["update_tickets"], id=99, status="closed")
    with pytest.raises(ValueError, match="at least one column"):
        call(tools["update_tickets"], id=1)


def test_values_are_bound_never_interpolated(tools: dict[str, Tool], db: Path) -> None:
    evil = "x'; DROP TABLE tickets; --"
    call(tools["insert_tickets"], customer=evil)
    assert call(tools["query_tickets"], customer=evil)["rows"][0]["customer"] == evil
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM tickets").fetchone() == (4,)


def test_arguments_are_validated_against_column_types(tools: dict[str, Tool]) -> None:
    with pytest.raises(pydantic.ValidationError):
        call(tools["insert_tickets"], customer="x", priority="high")
    with pytest.raises(pydantic.ValidationError):
        call(tools["insert_tickets"], priority=1)  # customer is required
    with pytest.raises(pydantic.ValidationError):
        call(tools["query_tickets"], owner="ada")  # unknown column


def test_configuration_errors(db: Path, tmp_path: Path) -> None:
    with pytest.raises(ToolConfigError, match="does not exist"):
        record_tools(db, "orders")
    with pytest.raises(ToolConfigError, match="plain identifier"):
        record_tools(db, "tickets; --")
    with pytest.raises(ToolConfigError, match="database file"):
        record_tools(tmp_path / "none.db", "tickets")
    with pytest.raises(ToolConfigError, match="no column"):
        record_tools(db, "tickets", columns=["nope"])
    only_query = record_tools(db, "tickets", operations=["query"], columns=["customer", "status"])
    assert [t.name for t in only_query] == ["query_tickets"]
    assert set(only_query[0].parameters["properties"]) == {"customer", "status", "limit"}
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE log (line TEXT)")
    with pytest.raises(ToolConfigError, match="primary key"):
        record_tools(db, "log")
