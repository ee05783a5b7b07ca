"""The model interface of the runtime: one step in, one action out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from agentflow.engine.chat_template import ChatMessage, ToolSpec

DecodingMode = Literal["diffusion", "hybrid", "ar", "auto"]


@dataclass(frozen=True)
class ToolCall:
    """One call the model asks for. ``id`` is assigned by the runtime when the model gives none."""

    name: str
    arguments: dict[str, Any]
    id: str = ""


@dataclass(frozen=True)
class Action:
    """What one step decides: parallel tool calls, or the final output (exactly one of them)."""

    tool_calls: tuple[ToolCall, ...] = ()
    final: Any = None
    is_final: bool = False


@dataclass
class StepUsage:
    """Cost of one model step."""

    input_tokens: int = 0
    output_tokens: int = 0
    forward_passes: int = 0
    forced_tokens: int = 0
    seconds: float = 0.0
    mode: str = ""
    #: Why the step was served in this mode (``auto`` fallbacks say what triggered them).
    reason: str = ""
    model: str = ""


@dataclass(frozen=True)
class StepRequest:
    """Everything a model needs to take one step."""

    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec]
    #: JSON Schema of the action union (tool calls | final), built by the runtime.
    action_schema: dict[str, Any]
    #: JSON Schema of the final output, or None for plain text.
    output_schema: dict[str, Any] | None = None
    instructions: str | None = None
    mode: DecodingMode | None = None
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StepResponse:
    """The model's action for the step, the raw text it produced, and what it cost."""

    action: Action
    text: str
    usage: StepUsage


@dataclass(frozen=True)
class StepDelta:
    """A streamed piece of a step: draft text so far (diffusion drafts a block at a time)."""

    text: str


@runtime_checkable
class Model(Protocol):
    """A back-end that turns a :class:`StepRequest` into a :class:`StepResponse`."""

    @property
    def name(self) -> str: ...

    async def step(self, request: StepRequest) -> StepResponse: ...

    def stream_step(self, request: StepRequest) -> AsyncIterator[StepDelta | StepResponse]:
        """Yield draft deltas, then the final :class:`StepResponse` last."""
        ...
