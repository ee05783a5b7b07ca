"""Exceptions of the runtime. Each names what went wrong; run failures carry the partial run."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .result import RunResult


class AgentflowError(Exception):
    """Base class of every runtime error."""


class ToolDefinitionError(AgentflowError, TypeError):
    """A function cannot be turned into a tool (missing annotation, bad name, ...)."""


class ToolTimeoutError(AgentflowError, TimeoutError):
    """A tool did not finish within its timeout (reported to the model as an observation)."""

    def __init__(self, tool: str, timeout: float) -> None:
        super().__init__(f"tool {tool!r} did not finish within {timeout:g}s")
        self.tool = tool
        self.timeout = timeout


class RunError(AgentflowError):
    """A run stopped before a valid final output; ``partial`` holds what it did so far."""

    def __init__(self, message: str, *, partial: RunResult | None = None) -> None:
        super().__init__(message)
        self.partial = partial


class MaxStepsExceeded(RunError):
    """The run reached ``max_steps`` without a final output."""


class ModelBehaviorError(RunError):
    """The model kept producing invalid actions (unknown tools, bad arguments, invalid output)
    past the retry budget."""


class RunNotFoundError(AgentflowError, KeyError):
    """``resume`` was asked for a run id the store does not know."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r} in the run store")
        self.run_id = run_id

    def __str__(self) -> str:
        return str(self.args[0])


class RunStateError(AgentflowError):
    """A stored run cannot be resumed (finished already, or recorded by a different agent)."""


def ensure_no_running_loop(what: str, instead: str) -> None:
    """Raise a clear error when a blocking entry point is called from async code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise AgentflowError(f"{what} cannot be called while an event loop is running; use {instead}")
