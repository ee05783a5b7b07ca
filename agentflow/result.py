"""What a run returns: its output, its steps, its usage and its trace (all plain data)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from agentflow.engine.chat_template import ChatMessage

from .events import Event, jsonable
from .models.base import Action, StepUsage
from .usage import RunUsage

OutputT = TypeVar("OutputT")


@dataclass
class ToolOutcome:
    """One finished tool call: its result, or the error the model was shown."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    result: Any = None
    error: str | None = None
    seconds: float = 0.0
    replayed: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    def observation(self) -> Any:
        """What the model sees: the result, or ``{"error": "..."}``."""
        return {"error": self.error} if self.error is not None else jsonable(self.result)


@dataclass
class StepRecord:
    """One step: the agent that took it, its action, what the model produced and cost, the tool outcomes."""

    index: int
    agent: str
    action: Action | None
    text: str
    usage: StepUsage
    tool_results: list[ToolOutcome] = field(default_factory=list)
    #: Why the step's action was rejected and fed back (unknown tool, bad arguments, bad output).
    retry_reason: str | None = None


@dataclass
class RunResult(Generic[OutputT]):
    """The outcome of ``agent.run``. On failure, the exception's ``partial`` is one of these with
    ``output`` None and ``completed`` False."""

    output: OutputT
    run_id: str
    agent: str
    steps: list[StepRecord]
    usage: RunUsage
    trace: list[Event]
    messages: list[ChatMessage]
    seconds: float = 0.0
    completed: bool = True

    @property
    def tool_calls(self) -> list[ToolOutcome]:
        """Every tool call of the run, in step order."""
        return [outcome for step in self.steps for outcome in step.tool_results]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (the trace as a list of event dicts)."""
        return {
            "run_id": self.run_id,
            "agent": self.agent,
            "output": jsonable(self.output),
            "completed": self.completed,
            "seconds": self.seconds,
            "usage": self.usage.to_dict(),
            "steps": [
                {
                    "index": s.index,
                    "agent": s.agent,
                    "action": s.action.to_json() if s.action else None,
                    "text": s.text,
                    "usage": s.usage.to_dict(),
                    "retry_reason": s.retry_reason,
                    "tool_results": [jsonable(t.__dict__) for t in s.tool_results],
                }
                for s in self.steps
            ],
            "trace": [e.to_dict() for e in self.trace],
        }
