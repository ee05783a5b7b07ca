"""Models for users' own tests: ``TestModel`` (deterministic, no weights) and ``FunctionModel``
(your function decides each action).

``TestModel`` calls every tool once — in one parallel step, or one tool per step —
with arguments generated from the tools' schemas, then returns a final output:
the one you configured, a value generated from the output schema, or the tool
results as compact JSON. It decides from the conversation alone, so one instance
serves any number of concurrent runs.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from agentflow.engine.chat_template import ChatMessage, compact_json

from .base import (
    Action,
    StepDelta,
    StepRequest,
    StepResponse,
    StepUsage,
    action_from_json,
    parse_action,
)

_UNSET: Any = object()


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    if not ref.startswith("#/"):
        raise ValueError(f"TestModel cannot follow the non-local $ref {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def sample_from_schema(
    schema: Mapping[str, Any] | bool, root: Mapping[str, Any] | None = None
) -> Any:
    """A simple deterministic value valid for ``schema`` (required properties only)."""
    if schema is True or schema == {}:
        return "a"
    if schema is False:
        raise ValueError("no value satisfies the schema `false`")
    root = root if root is not None else schema
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return sample_from_schema(options[0], root)
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for sub in schema["allOf"]:
            merged.update(_resolve(sub, root))
        return sample_from_schema(merged, root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "string":
        formats = {
            "date": "2024-01-01",
            "date-time": "2024-01-01T00:00:00Z",
            "time": "00:00:00",
            "email": "user@example.com",
            "uri": "https://example.com",
            "uuid": "00000000-0000-4000-8000-000000000000",
        }
        if schema.get("format") in formats:
            return formats[schema["format"]]
        return "a" * max(1, int(schema.get("minLength", 1)))
    if kind in ("integer", "number"):
        value: float = 0
        if "minimum" in schema:
            value = schema["minimum"]
        elif "exclusiveMinimum" in schema:
            value = schema["exclusiveMinimum"] + 1
        elif "maximum" in schema and schema["maximum"] < 0:
            value = schema["maximum"]
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind == "array":
        count = int(schema.get("minItems", 0))
        return [sample_from_schema(schema.get("items", True), root) for _ in range(count)]
    required = schema.get("required", [])
    props = schema.get("properties", {})
    return {name: sample_from_schema(props.get(name, True), root) for name in required}


def _since_last_user(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return list(messages[i + 1 :])
    return list(messages)


def _approx_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _usage(request: StepRequest, text: str, started: float, mode: str, model: str) -> StepUsage:
    prompt = sum(_approx_tokens(m.content) for m in request.messages)
    return StepUsage(
        input_tokens=prompt,
        output_tokens=_approx_tokens(text),
        seconds=time.perf_counter() - started,
        mode=mode,
        model=model,
    )


async def _stream_text(text: str, chunk: int) -> AsyncIterator[StepDelta]:
    for end in range(chunk, len(text) + chunk, chunk):
        yield StepDelta(text=text[: min(end, len(text))])


class TestModel:
    """Deterministic model: call the tools once, then answer. No weights, no randomness."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        *,
        call_tools: Sequence[str] | Literal["all"] = "all",
        final_output: Any = _UNSET,
        parallel: bool = True,
        stream_chunk: int = 16,
    ) -> None:
        if stream_chunk < 1:
            raise ValueError(f"stream_chunk must be >= 1, got {stream_chunk}")
        self.call_tools = call_tools
        self.final_output = final_output
        self.parallel = parallel
        self.stream_chunk = stream_chunk

    @property
    def name(self) -> str:
        return "test"

    def decide(self, request: StepRequest) -> Action:
        """The action for this step of the conversation."""
        wanted = [
            t.name for t in request.tools if self.call_tools == "all" or t.name in self.call_tools
        ]
        recent = _since_last_user(request.messages)
        called = {m.name for m in recent if m.role == "tool"}
        todo = [name for name in wanted if name not in called]
        if todo:
            names = todo if self.parallel else todo[:1]
            specs = {t.name: t for t in request.tools}
            return Action.call(*[(n, sample_from_schema(dict(specs[n].parameters))) for n in names])
        if self.final_output is not _UNSET:
            return Action.final_output(self.final_output)
        if request.output_schema is not None:
            return Action.final_output(sample_from_schema(request.output_schema))
        results = {m.name or "tool": _loads(m.content) for m in recent if m.role == "tool"}
        return Action.final_output(compact_json(results) if results else "success (no tool calls)")

    async def step(self, request: StepRequest) -> StepResponse:
        started = time.perf_counter()
        action = self.decide(request)
        text = action.to_json()
        return StepResponse(
            action=action, text=text, usage=_usage(request, text, started, "test", self.name)
        )

    async def stream_step(self, request: StepRequest) -> AsyncIterator[StepDelta | StepResponse]:
        started = time.perf_counter()
        action = self.decide(request)
        text = action.to_json()
        async for delta in _stream_text(text, self.stream_chunk):
            yield delta
        yield StepResponse(
            action=action, text=text, usage=_usage(request, text, started, "test", self.name)
        )


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


ActionLike = Action | str | Mapping[str, Any]
StepFunction = Callable[[StepRequest], ActionLike] | Callable[[StepRequest], Awaitable[ActionLike]]
StreamFunction = Callable[[StepRequest], AsyncIterable[str]]


def _to_action(value: ActionLike) -> tuple[Action, str]:
    if isinstance(value, Action):
        return value, value.to_json()
    if isinstance(value, str):
        return parse_action(value), value
    if isinstance(value, Mapping):
        action = action_from_json(value, text=compact_json(dict(value)))
        return action, action.to_json()
    raise TypeError(
        f"a FunctionModel function must return an Action, action JSON text or a dict, got {type(value).__name__}"
    )


class FunctionModel:
    """A model whose every step is decided by your function of the :class:`StepRequest`.

    The function returns an :class:`Action`, action JSON text, or a dict like
    ``{"tool_calls": [...]}``; nothing is checked against the schema, so it behaves
    like an unconstrained remote model (invalid actions are fed back and retried).
    ``stream_function`` optionally yields the action text in chunks for ``run_stream``.
    """

    def __init__(
        self,
        function: StepFunction,
        *,
        stream_function: StreamFunction | None = None,
        name: str = "function",
    ) -> None:
        if not callable(function):
            raise TypeError(f"FunctionModel needs a callable, got {type(function).__name__}")
        self.function = function
        self.stream_function = stream_function
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    async def step(self, request: StepRequest) -> StepResponse:
        started = time.perf_counter()
        value = self.function(request)
        if inspect.isawaitable(value):
            value = await value
        action, text = _to_action(value)
        return StepResponse(
            action=action, text=text, usage=_usage(request, text, started, "function", self.name)
        )

    async def stream_step(self, request: StepRequest) -> AsyncIterator[StepDelta | StepResponse]:
        if self.stream_function is None:
            response = await self.step(request)
            yield StepDelta(text=response.text)
            yield response
            return
        started = time.perf_counter()
        text = ""
        async for chunk in self.stream_function(request):
            text += chunk
            yield StepDelta(text=text)
        action, _ = _to_action(text)
        yield StepResponse(
            action=action, text=text, usage=_usage(request, text, started, "function", self.name)
        )
