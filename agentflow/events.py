"""Events of a run, in the order they happen. ``agent.run_stream()`` yields them and the
tracer writes each as one JSON line; every event is plain data (``to_dict``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic_core import to_jsonable_python

from .models.base import StepUsage

if TYPE_CHECKING:
    from .result import RunResult


def jsonable(value: Any) -> Any:
    """JSON-ready form of a value (pydantic models, dataclasses, ...; unknown objects as str)."""
    return to_jsonable_python(value, fallback=str)


@dataclass(frozen=True, kw_only=True)
class Event:
    """Common fields: which run, which agent, which step (0-based; -1 before the first)."""

    type: ClassVar[str] = "event"
    run_id: str
    agent: str
    step: int = -1
    time: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data, with a ``type`` key."""
        out: dict[str, Any] = {"type": self.type}
        for f in fields(self):
            if f.name == "result":
                continue
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if isinstance(value, StepUsage) else jsonable(value)
        return out


@dataclass(frozen=True, kw_only=True)
class RunStart(Event):
    """A run began (or was resumed from the store)."""

    type: ClassVar[str] = "run_start"
    input: str
    resumed: bool = False


@dataclass(frozen=True, kw_only=True)
class StepStart(Event):
    """A step began: the model is asked for the next action."""

    type: ClassVar[str] = "step_start"


@dataclass(frozen=True, kw_only=True)
class DraftText(Event):
    """The step's action text so far, as the model drafts it (``run_stream`` only)."""

    type: ClassVar[str] = "draft"
    text: str


@dataclass(frozen=True, kw_only=True)
class StepEnd(Event):
    """The model decided the step's action; ``usage`` is what the step cost."""

    type: ClassVar[str] = "step_end"
    action: str
    usage: StepUsage


@dataclass(frozen=True, kw_only=True)
class ToolCallEvent(Event):
    """A tool call is about to run."""

    type: ClassVar[str] = "tool_call"
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ToolResultEvent(Event):
    """A tool call finished: ``result`` on success, ``error`` (a string) otherwise."""

    type: ClassVar[str] = "tool_result"
    call_id: str
    name: str
    result: Any = None
    error: str | None = None
    seconds: float = 0.0
    #: True when the result came from the run store (a resumed run does not re-run it).
    replayed: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["result"] = jsonable(self.result)
        return out


@dataclass(frozen=True, kw_only=True)
class RetryEvent(Event):
    """The model's action was invalid; the reason was fed back and the step is retried."""

    type: ClassVar[str] = "retry"
    reason: str


@dataclass(frozen=True, kw_only=True)
class HandoffEvent(Event):
    """Control passed from ``agent`` to ``to_agent``."""

    type: ClassVar[str] = "handoff"
    to_agent: str


@dataclass(frozen=True, kw_only=True)
class FinalEvent(Event):
    """The run ended with a validated output; ``result`` is the whole :class:`RunResult`."""

    type: ClassVar[str] = "final"
    output: Any
    result: RunResult | None = None


@dataclass(frozen=True, kw_only=True)
class RunFailed(Event):
    """The run stopped with an error (max steps, retries exhausted, a crash)."""

    type: ClassVar[str] = "run_failed"
    error: str


AgentEvent = (
    RunStart
    | StepStart
    | DraftText
    | StepEnd
    | ToolCallEvent
    | ToolResultEvent
    | RetryEvent
    | HandoffEvent
    | FinalEvent
    | RunFailed
)
