"""Durable runs: every step and every finished tool call is checkpointed to SQLite.

Three tables. ``runs`` holds the input and the status; ``steps`` one row per model
step, written as soon as the action is decided (with the call ids) and completed
with the messages the step appended once its tools are done; ``tool_results`` one
row per finished tool call, keyed by ``(run_id, call_id)`` and written the moment
the call finishes. ``Agent.resume`` rebuilds the conversation from completed
steps, replays the recorded results of an unfinished step and runs only the calls
that have no row. The connection is used from worker threads (the event loop never
blocks on disk) behind one lock; WAL mode keeps a crash from corrupting the file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio.to_thread

from agentflow.engine.chat_template import ChatMessage, compact_json

from .errors import RunNotFoundError
from .events import jsonable
from .models.base import Action, StepUsage, ToolCall
from .result import ToolOutcome

RunStatus = Literal["running", "completed", "failed"]
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    input TEXT NOT NULL,
    history TEXT NOT NULL,
    status TEXT NOT NULL,
    output TEXT,
    error TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS steps (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    idx INTEGER NOT NULL,
    agent TEXT NOT NULL,
    action TEXT,
    text TEXT NOT NULL,
    usage TEXT NOT NULL,
    retry_reason TEXT,
    messages TEXT,
    next_agent TEXT,
    PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS tool_results (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    call_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    result TEXT,
    error TEXT,
    seconds REAL NOT NULL,
    PRIMARY KEY (run_id, call_id)
);
"""


def messages_to_json(messages: Sequence[ChatMessage]) -> str:
    return compact_json([{"role": m.role, "content": m.content, "name": m.name} for m in messages])


def messages_from_json(text: str) -> list[ChatMessage]:
    return [
        ChatMessage(role=m["role"], content=m["content"], name=m.get("name"))
        for m in json.loads(text)
    ]


def _action_to_json(action: Action) -> str:
    if action.is_final:
        return compact_json({"final": jsonable(action.final)})
    return compact_json(
        {
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in action.tool_calls
            ]
        }
    )


def _action_from_json(text: str) -> Action:
    data = json.loads(text)
    if "final" in data:
        return Action.final_output(data["final"])
    return Action(
        tool_calls=tuple(
            ToolCall(name=c["name"], arguments=c["arguments"], id=c["id"])
            for c in data["tool_calls"]
        )
    )


@dataclass
class StoredStep:
    """One step as the store has it; ``messages`` is None while its tools have not all finished."""

    index: int
    agent: str
    action: Action | None
    text: str
    usage: StepUsage
    retry_reason: str | None
    messages: list[ChatMessage] | None
    next_agent: str | None
    results: dict[str, ToolOutcome] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.messages is not None


@dataclass
class StoredRun:
    """A run as the store has it."""

    run_id: str
    agent: str
    input: str
    history: list[ChatMessage]
    status: RunStatus
    output: Any
    error: str | None
    steps: list[StoredStep]


class RunStore:
    """SQLite checkpoint store for runs; ``path=":memory:"`` keeps it in this process only."""

    def __init__(self, path: str | Path = ":memory:", *, threaded: bool | None = None) -> None:
        self.path = str(path)
        #: Run SQLite calls in a worker thread (default: for files; an in-memory store never
        #: touches the disk, so it runs inline and saves the thread hop).
        self.threaded = self.path != ":memory:" if threaded is None else threaded
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    def _locked(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            return fn(self._conn)

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if not self.threaded:
            return self._locked(fn)
        return await anyio.to_thread.run_sync(self._locked, fn)

    async def create_run(
        self, run_id: str, agent: str, input: str, history: Sequence[ChatMessage]
    ) -> None:
        """Record a new run."""
        now = time.time()
        await self._run(
            lambda c: c.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, 'running', NULL, NULL, ?, ?)",
                (run_id, agent, input, messages_to_json(history), now, now),
            )
        )

    async def record_step(
        self,
        run_id: str,
        index: int,
        agent: str,
        action: Action | None,
        text: str,
        usage: StepUsage,
        retry_reason: str | None = None,
    ) -> None:
        """Record a step's decided action (before its tools run)."""
        await self._run(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
                (
                    run_id,
                    index,
                    agent,
                    _action_to_json(action) if action is not None else None,
                    text,
                    compact_json(usage.to_dict()),
                    retry_reason,
                ),
            )
        )

    async def record_tool_result(self, run_id: str, step: int, outcome: ToolOutcome) -> None:
        """Record one finished tool call (its result or its error)."""
        await self._run(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO tool_results VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    outcome.call_id,
                    step,
                    outcome.name,
                    compact_json(jsonable(outcome.arguments)),
                    compact_json(jsonable(outcome.result)) if outcome.error is None else None,
                    outcome.error,
                    outcome.seconds,
                ),
            )
        )

    async def complete_step(
        self, run_id: str, index: int, messages: Sequence[ChatMessage], next_agent: str
    ) -> None:
        """Mark a step done: the messages it appended and the agent that takes the next step."""

        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "UPDATE steps SET messages = ?, next_agent = ? WHERE run_id = ? AND idx = ?",
                (messages_to_json(messages), next_agent, run_id, index),
            )
            c.execute("UPDATE runs SET updated = ? WHERE run_id = ?", (time.time(), run_id))

        await self._run(write)

    async def finish_run(
        self, run_id: str, status: RunStatus, *, output: Any = None, error: str | None = None
    ) -> None:
        """Record how the run ended."""
        await self._run(
            lambda c: c.execute(
                "UPDATE runs SET status = ?, output = ?, error = ?, updated = ? WHERE run_id = ?",
                (status, compact_json(jsonable(output)), error, time.time(), run_id),
            )
        )

    async def load_run(self, run_id: str) -> StoredRun:
        """Everything recorded about ``run_id``; :class:`RunNotFoundError` if unknown."""

        def read(c: sqlite3.Connection) -> tuple[Any, list[Any], list[Any]]:
            run = c.execute(
                "SELECT agent, input, history, status, output, error FROM runs WHERE run_id = ?",
                (run_id,),
            ).fetchone()
            steps = c.execute(
                "SELECT idx, agent, action, text, usage, retry_reason, messages, next_agent "
                "FROM steps WHERE run_id = ? ORDER BY idx",
                (run_id,),
            ).fetchall()
            results = c.execute(
                "SELECT call_id, step, name, arguments, result, error, seconds "
                "FROM tool_results WHERE run_id = ?",
                (run_id,),
            ).fetchall()
            return run, steps, results

        run, step_rows, result_rows = await self._run(read)
        if run is None:
            raise RunNotFoundError(run_id)
        steps = [
            StoredStep(
                index=row[0],
                agent=row[1],
                action=_action_from_json(row[2]) if row[2] is not None else None,
                text=row[3],
                usage=StepUsage(**json.loads(row[4])),
                retry_reason=row[5],
                messages=messages_from_json(row[6]) if row[6] is not None else None,
                next_agent=row[7],
            )
            for row in step_rows
        ]
        by_index = {s.index: s for s in steps}
        for call_id, step, name, arguments, result, error, seconds in result_rows:
            if step in by_index:
                by_index[step].results[call_id] = ToolOutcome(
                    call_id=call_id,
                    name=name,
                    arguments=json.loads(arguments),
                    result=json.loads(result) if result is not None else None,
                    error=error,
                    seconds=seconds,
                    replayed=True,
                )
        agent, input_text, history, status, output, error = run
        return StoredRun(
            run_id=run_id,
            agent=agent,
            input=input_text,
            history=messages_from_json(history),
            status=status,
            output=json.loads(output) if output is not None else None,
            error=error,
            steps=steps,
        )

    async def list_runs(self, status: RunStatus | None = None) -> list[str]:
        """Run ids, oldest first, optionally only those with ``status`` (e.g. ``"running"`` after a crash)."""
        query = "SELECT run_id FROM runs"
        params: tuple[Any, ...] = ()
        if status is not None:
            query += " WHERE status = ?"
            params = (status,)
        rows = await self._run(lambda c: c.execute(query + " ORDER BY created", params).fetchall())
        return [r[0] for r in rows]
