"""SQLite records tools: typed query / insert / update tools over one table.

The table is introspected once (``PRAGMA table_info``): each column becomes a
typed tool parameter (INTEGER → int, REAL → float, TEXT → str, BOOLEAN → bool),
so the model's arguments are validated before any SQL runs. Identifiers come
only from that introspection and are quoted; values are always bound
parameters — the model never writes SQL.

- ``query_<table>``: rows whose columns equal the given values (all optional), up to ``limit``;
- ``insert_<table>``: a new row (NOT NULL columns without a default are required);
- ``update_<table>``: set the given columns on the row with the given primary key.
"""

from __future__ import annotations

import inspect
import os
import re
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentflow.tool import Tool, tool

from .errors import RecordNotFoundError, ToolConfigError

_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
OPERATIONS = ("query", "insert", "update")


@dataclass(frozen=True)
class Column:
    """One column as introspected."""

    name: str
    type: type
    declared: str
    required: bool
    primary_key: bool


def _python_type(declared: str) -> type:
    # SQLite type affinity rules (section 3.1 of the datatype docs), plus BOOL.
    upper = declared.upper()
    if "BOOL" in upper:
        return bool
    if "INT" in upper:
        return int
    if any(t in upper for t in ("CHAR", "CLOB", "TEXT")):
        return str
    if any(t in upper for t in ("REAL", "FLOA", "DOUB")):
        return float
    if "NUM" in upper or "DEC" in upper:
        return float
    return str


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def introspect(db_path: Path, table: str) -> list[Column]:
    """The columns of ``table``; :class:`ToolConfigError` if the table is missing or unusable."""
    if not _IDENT.match(table):
        raise ToolConfigError(f"table name {table!r} must be a plain identifier")
    with closing(sqlite3.connect(db_path)) as conn:
        rows = conn.execute(f"PRAGMA table_info({_quote(table)})").fetchall()
    if not rows:
        raise ToolConfigError(f"table {table!r} does not exist in {str(db_path)!r}")
    columns = []
    for _cid, name, declared, notnull, default, pk in rows:
        if not _IDENT.match(name):
            raise ToolConfigError(
                f"column {name!r} of {table!r} is not a plain identifier; pass columns= to leave it out"
            )
        py = _python_type(declared or "")
        rowid_alias = pk == 1 and (declared or "").upper() == "INTEGER"
        columns.append(
            Column(
                name=name,
                type=py,
                declared=declared or "",
                required=bool(notnull) and default is None and not rowid_alias,
                primary_key=pk > 0,
            )
        )
    return columns


def _function(
    name: str,
    doc: str,
    params: list[inspect.Parameter],
    body: Callable[..., Any],
) -> Callable[..., Any]:
    """A keyword-only function with a real signature, so :func:`tool` can build its schema."""

    def call(**kwargs: Any) -> Any:
        return body(**kwargs)

    call.__name__ = name
    call.__doc__ = doc
    call.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params}
    return call


def _args_doc(summary: str, notes: dict[str, str]) -> str:
    lines = [summary, "", "Args:"]
    lines += [f"    {name}: {text}" for name, text in notes.items()]
    return "\n".join(lines)


class RecordTools:
    """Typed tools over one SQLite table; ``tools()`` gives the :class:`Tool` objects."""

    def __init__(
        self,
        db_path: str | os.PathLike[str],
        table: str,
        *,
        operations: Sequence[str] = OPERATIONS,
        columns: Sequence[str] | None = None,
        max_rows: int = 50,
        description: str = "",
    ) -> None:
        self.db_path = Path(db_path)
        if not self.db_path.is_file():
            raise ToolConfigError(f"database file {str(self.db_path)!r} does not exist")
        unknown = set(operations) - set(OPERATIONS)
        if unknown or not operations:
            raise ToolConfigError(
                f"operations must be a non-empty subset of {OPERATIONS}, got {list(operations)}"
            )
        if max_rows <= 0:
            raise ToolConfigError("max_rows must be positive")
        self.table = table
        self.operations = tuple(operations)
        self.max_rows = max_rows
        self.description = description
        all_columns = introspect(self.db_path, table)
        if columns is not None:
            known = {c.name for c in all_columns}
            missing = [c for c in columns if c not in known]
            if missing:
                raise ToolConfigError(f"table {table!r} has no column(s) {missing}")
            all_columns = [c for c in all_columns if c.name in set(columns)]
        if "query" in self.operations and any(c.name == "limit" for c in all_columns):
            raise ToolConfigError(
                f"column 'limit' of {table!r} clashes with the query tool's limit; pass columns= to leave it out"
            )
        self.columns = all_columns
        keys = [c for c in all_columns if c.primary_key]
        self.key = keys[0] if len(keys) == 1 else None
        if "update" in self.operations and self.key is None:
            raise ToolConfigError(
                f"update needs a single-column primary key on {table!r} (among the exposed columns)"
            )

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path, timeout=10.0)
        conn.row_factory = sqlite3.Row
        return conn

    def _select(
        self, conn: sqlite3.Connection, where: dict[str, Any], limit: int
    ) -> list[dict[str, Any]]:
        cols = ", ".join(_quote(c.name) for c in self.columns)
        sql = f"SELECT {cols} FROM {_quote(self.table)}"
        if where:
            sql += " WHERE " + " AND ".join(f"{_quote(k)} = ?" for k in where)
        sql += " LIMIT ?"
        rows = conn.execute(sql, [*where.values(), limit]).fetchall()
        return [dict(r) for r in rows]

    def query(self, *, limit: int, **filters: Any) -> dict[str, Any]:
        """Rows matching every given column value (``None`` = no filter)."""
        if not 1 <= limit <= self.max_rows:
            raise ValueError(f"limit must be between 1 and {self.max_rows}, got {limit}")
        where = {k: v for k, v in filters.items() if v is not None}
        with closing(self._connect()) as conn:
            rows = self._select(conn, where, limit + 1)
        return {"rows": rows[:limit], "more": len(rows) > limit}

    def insert(self, **values: Any) -> dict[str, Any]:
        """Insert one row; returns it as stored (with its generated key)."""
        given = {k: v for k, v in values.items() if v is not None}
        with closing(self._connect()) as conn, conn:
            if given:
                names = ", ".join(_quote(k) for k in given)
                marks = ", ".join("?" for _ in given)
                sql = f"INSERT INTO {_quote(self.table)} ({names}) VALUES ({marks})"
            else:
                sql = f"INSERT INTO {_quote(self.table)} DEFAULT VALUES"
            cursor = conn.execute(sql, list(given.values()))
            cols = ", ".join(_quote(c.name) for c in self.columns)
            row = conn.execute(
                f"SELECT {cols} FROM {_quote(self.table)} WHERE rowid = ?", [cursor.lastrowid]
            ).fetchone()
        return dict(row) if row is not None else given

    def update(self, **values: Any) -> dict[str, Any]:
        """Set the given columns on the row whose primary key matches; returns the row."""
        assert self.key is not None
        key_value = values.pop(self.key.name)
        changes = {k: v for k, v in values.items() if v is not None}
        if not changes:
            raise ValueError("update needs at least one column to change")
        with closing(self._connect()) as conn, conn:
            sets = ", ".join(f"{_quote(k)} = ?" for k in changes)
            cursor = conn.execute(
                f"UPDATE {_quote(self.table)} SET {sets} WHERE {_quote(self.key.name)} = ?",
                [*changes.values(), key_value],
            )
            if cursor.rowcount == 0:
                raise RecordNotFoundError(
                    f"no {self.table} row with {self.key.name} = {key_value!r}"
                )
            rows = self._select(conn, {self.key.name: key_value}, 1)
        return rows[0]

    def _query_tool(self) -> Tool:
        params = [
            inspect.Parameter(
                c.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=c.type | None
            )
            for c in self.columns
        ]
        default_limit = min(20, self.max_rows)
        params.append(
            inspect.Parameter(
                "limit", inspect.Parameter.KEYWORD_ONLY, default=default_limit, annotation=int
            )
        )
        notes = {c.name: f"only rows whose {c.name} equals this" for c in self.columns}
        notes["limit"] = f"at most this many rows (1-{self.max_rows})"
        summary = self.description or f"Find {self.table} records by exact column values."
        fn = _function(f"query_{self.table}", _args_doc(summary, notes), params, self.query)
        return tool(fn)

    def _insert_tool(self) -> Tool:
        params = [
            inspect.Parameter(
                c.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if c.required else None,
                annotation=c.type if c.required else c.type | None,
            )
            for c in sorted(self.columns, key=lambda c: not c.required)
        ]
        notes = {c.name: f"{c.declared or 'value'} column" for c in self.columns}
        fn = _function(
            f"insert_{self.table}",
            _args_doc(f"Add a new {self.table} record.", notes),
            params,
            self.insert,
        )
        return tool(fn)

    def _update_tool(self) -> Tool:
        assert self.key is not None
        key = self.key
        params = [inspect.Parameter(key.name, inspect.Parameter.KEYWORD_ONLY, annotation=key.type)]
        params += [
            inspect.Parameter(
                c.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=c.type | None
            )
            for c in self.columns
            if c is not key
        ]
        notes = {key.name: f"the {self.table} record to change"}
        notes |= {c.name: f"new value for {c.name}" for c in self.columns if c is not key}
        summary = f"Change fields of one {self.table} record, found by {key.name}."
        fn = _function(f"update_{self.table}", _args_doc(summary, notes), params, self.update)
        return tool(fn)

    def tools(self) -> list[Tool]:
        """The tools for the configured operations, in ``query, insert, update`` order."""
        builders = {
            "query": self._query_tool,
            "insert": self._insert_tool,
            "update": self._update_tool,
        }
        return [builders[op]() for op in OPERATIONS if op in self.operations]


def record_tools(
    db_path: str | os.PathLike[str],
    table: str,
    *,
    operations: Sequence[str] = OPERATIONS,
    columns: Sequence[str] | None = None,
    max_rows: int = 50,
    description: str = "",
) -> list[Tool]:
    """Typed query/insert/update tools over ``table`` in the SQLite file ``db_path``."""
    return RecordTools(
        db_path,
        table,
        operations=operations,
        columns=columns,
        max_rows=max_rows,
        description=description,
    ).tools()
