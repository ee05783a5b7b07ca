"""The act phase of a step: check the model's calls, run the valid ones concurrently.

Calls the model should not have made (an unknown tool, arguments the schema
rejects, a second handoff in one step) are not run; they get an error outcome that
the model sees as the observation. Valid calls run on one anyio task group, each
under its own timeout; an exception or a timeout becomes an error outcome, never a
crash of the run. Each outcome is handed to ``on_finish`` (the run store records
it) the moment it exists, shielded from cancellation so a finished call is never
lost.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic import ValidationError

from .context import RunContext
from .errors import ToolTimeoutError
from .models.base import ToolCall
from .result import ToolOutcome
from .tool import Tool

OnFinish = Callable[[ToolOutcome], Awaitable[None]]


def describe_validation_error(tool: str, exc: ValidationError) -> str:
    """A short, model-readable account of what is wrong with the arguments."""
    problems = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return f"invalid arguments for tool {tool!r}: " + "; ".join(problems)


@dataclass
class ActResult:
    """Outcomes in call order, in completion order, and the rejected calls' reasons."""

    outcomes: list[ToolOutcome]
    finished_order: list[ToolOutcome]
    rejected: list[str] = field(default_factory=list)
    seconds: float = 0.0


def check_calls(
    calls: Sequence[ToolCall], tools: Mapping[str, Tool]
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Split calls into validated kwargs by call id and error messages by call id."""
    valid: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    handoff_taken: str | None = None
    for call in calls:
        tool = tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(tools)) or "none"
            errors[call.id] = f"unknown tool {call.name!r}; available tools: {known}"
            continue
        try:
            kwargs = tool.validate(call.arguments)
        except ValidationError as exc:
            errors[call.id] = describe_validation_error(call.name, exc)
            continue
        if "handoff" in tool.metadata:
            if handoff_taken is not None:
                errors[call.id] = (
                    f"only one handoff per step: control already passes via {handoff_taken!r}"
                )
                continue
            handoff_taken = call.name
        valid[call.id] = kwargs
    return valid, errors


async def act(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    *,
    make_context: Callable[[str], RunContext[Any]],
    default_timeout: float | None,
    on_finish: OnFinish,
    replayed: Mapping[str, ToolOutcome] | None = None,
) -> ActResult:
    """Run one step's tool calls; outcomes already in ``replayed`` are reused, not re-run."""
    started = time.perf_counter()
    replayed = replayed or {}
    valid, errors = check_calls(calls, tools)
    by_id: dict[str, ToolOutcome] = {}
    finished: list[ToolOutcome] = []

    async def finish(outcome: ToolOutcome) -> None:
        by_id[outcome.call_id] = outcome
        finished.append(outcome)
        with anyio.CancelScope(shield=True):
            await on_finish(outcome)

    async def run_one(call: ToolCall, kwargs: dict[str, Any]) -> None:
        tool = tools[call.name]
        timeout = tool.timeout if tool.timeout is not None else default_timeout
        t0 = time.perf_counter()
        result: Any = None
        error: str | None = None
        try:
            with anyio.move_on_after(timeout) as scope:
                result = await tool.call_validated(kwargs, make_context(call.id))
            if scope.cancelled_caught:
                error = f"TimeoutError: {ToolTimeoutError(call.name, timeout or 0.0)}"
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        await finish(
            ToolOutcome(
                call_id=call.id,
                name=call.name,
                arguments=dict(call.arguments),
                result=result,
                error=error,
                seconds=time.perf_counter() - t0,
            )
        )

    for call in calls:
        if call.id in replayed:
            by_id[call.id] = replayed[call.id]
            finished.append(replayed[call.id])
        elif call.id in errors:
            await finish(
                ToolOutcome(
                    call_id=call.id,
                    name=call.name,
                    arguments=dict(call.arguments),
                    error=errors[call.id],
                )
            )
    pending = [c for c in calls if c.id in valid and c.id not in replayed]
    if len(pending) == 1:  # no task group needed for the common single call
        await run_one(pending[0], valid[pending[0].id])
    elif pending:
        async with anyio.create_task_group() as tg:
            for call in pending:
                tg.start_soon(run_one, call, valid[call.id])
    return ActResult(
        outcomes=[by_id[c.id] for c in calls],
        finished_order=finished,
        rejected=[errors[c.id] for c in calls if c.id in errors and c.id not in replayed],
        seconds=time.perf_counter() - started,
    )
