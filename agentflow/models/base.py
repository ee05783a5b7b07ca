"""The model interface of the runtime: one step in, one action out."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from agentflow.engine.chat_template import ChatMessage, ToolSpec, compact_json

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

    def __post_init__(self) -> None:
        if self.is_final and self.tool_calls:
            raise ValueError("an action is either tool calls or the final output, not both")
        if not self.is_final and not self.tool_calls:
            raise ValueError("an action needs at least one tool call or a final output")

    @classmethod
    def final_output(cls, output: Any) -> Action:
        """The action that ends the run with ``output``."""
        return cls(final=output, is_final=True)

    @classmethod
    def call(cls, *calls: ToolCall | tuple[str, Mapping[str, Any]]) -> Action:
        """The action that calls one or several tools (``ToolCall``s or ``(name, arguments)`` pairs)."""
        return cls(
            tool_calls=tuple(
                c if isinstance(c, ToolCall) else ToolCall(name=c[0], arguments=dict(c[1]))
                for c in calls
            )
        )

    def to_json(self) -> str:
        """The action in the canonical compact JSON of the chat template (call ids are not part of it)."""
        if self.is_final:
            return compact_json({"final": self.final})
        return compact_json(
            {"tool_calls": [{"name": c.name, "arguments": c.arguments} for c in self.tool_calls]}
        )


class ActionParseError(ValueError):
    """A model's text is not an action: not JSON, or not ``{"tool_calls": [...]}`` / ``{"final": ...}``."""

    def __init__(self, message: str, *, text: str) -> None:
        super().__init__(message)
        self.text = text


def action_from_json(value: Any, *, text: str = "") -> Action:
    """Build an :class:`Action` from decoded action JSON; :class:`ActionParseError` names what is wrong."""
    if not isinstance(value, Mapping):
        raise ActionParseError(
            f"an action must be a JSON object, got {type(value).__name__}", text=text
        )
    keys = set(value)
    if keys == {"final"}:
        return Action.final_output(value["final"])
    if keys != {"tool_calls"}:
        raise ActionParseError(
            f"an action has exactly one key, 'tool_calls' or 'final'; got {sorted(keys)}", text=text
        )
    raw_calls = value["tool_calls"]
    if not isinstance(raw_calls, list) or not raw_calls:
        raise ActionParseError("'tool_calls' must be a non-empty list", text=text)
    calls = []
    for i, raw in enumerate(raw_calls):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            raise ActionParseError(f"tool_calls[{i}] needs a string 'name'", text=text)
        args = raw.get("arguments", {})
        if isinstance(args, str):  # some remote APIs send arguments as a JSON string
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as exc:
                raise ActionParseError(
                    f"tool_calls[{i}].arguments is not valid JSON: {exc}", text=text
                ) from exc
        if not isinstance(args, Mapping):
            raise ActionParseError(f"tool_calls[{i}].arguments must be an object", text=text)
        calls.append(ToolCall(name=raw["name"], arguments=dict(args), id=str(raw.get("id") or "")))
    return Action(tool_calls=tuple(calls))


def parse_action(text: str) -> Action:
    """Parse action JSON text (as the embedded models produce it) into an :class:`Action`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ActionParseError(f"action is not valid JSON: {exc}", text=text) from exc
    return action_from_json(value, text=text)


@dataclass
class StepUsage:
    """Cost of one model step."""

    input_tokens: int = 0
    output_tokens: int = 0
    forward_passes: int = 0
    forced_tokens: int = 0
    #: Input tokens the model copied from its prompt cache instead of reading them.
    cached_input_tokens: int = 0
    seconds: float = 0.0
    mode: str = ""
    #: Why the step was served in this mode (``auto`` fallbacks say what triggered them).
    reason: str = ""
    model: str = ""
    #: Requests served together with this one in a single engine call (1 = not batched).
    batch_size: int = 1

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "forward_passes": self.forward_passes,
            "forced_tokens": self.forced_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "seconds": self.seconds,
            "mode": self.mode,
            "reason": self.reason,
            "model": self.model,
            "batch_size": self.batch_size,
        }


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
