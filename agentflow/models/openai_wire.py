"""The chat.completions wire format, client side: requests out, actions back.

:class:`~agentflow.models.openai.OpenAIModel` sends a :class:`StepRequest` as an
OpenAI ``chat.completions`` body and turns the reply into an :class:`Action`.

The runtime's conversation stores an assistant turn as its action JSON
(``{"tool_calls":[...]}`` or ``{"final": ...}``) and a tool result as a
``tool`` message named after the tool. OpenAI needs ``tool_call_id`` links
instead, so ids are assigned deterministically per request (``call_<turn>_<i>``)
and each tool message is matched to the earliest unanswered call of the same
name (falling back to the earliest unanswered call).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentflow.engine.chat_template import ChatMessage, ToolSpec, format_final, format_tool_calls

from .base import Action, StepRequest, ToolCall

#: ``StepRequest.settings`` keys forwarded as-is to the endpoint.
FORWARDED_SETTINGS = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "seed",
    "stop",
    "tool_choice",
    "parallel_tool_calls",
    "presence_penalty",
    "frequency_penalty",
    "user",
)


class ModelResponseError(Exception):
    """The endpoint answered 2xx but the body is not a usable chat completion."""

    def __init__(self, message: str, *, body: Any = None) -> None:
        super().__init__(message)
        self.body = body


def _parse_action(content: str) -> dict[str, Any] | None:
    try:
        value = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return None
    if isinstance(value, dict) and (
        set(value) == {"final"}
        or (set(value) == {"tool_calls"} and isinstance(value["tool_calls"], list))
    ):
        return value
    return None


def _final_content(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def messages_to_openai(
    messages: Sequence[ChatMessage], instructions: str | None = None
) -> list[dict[str, Any]]:
    """The runtime's conversation as OpenAI chat messages (with tool-call id links)."""
    out: list[dict[str, Any]] = []
    if instructions:
        out.append({"role": "system", "content": instructions})
    pending: list[tuple[str, str]] = []  # (call id, tool name), unanswered calls
    for turn, msg in enumerate(messages):
        if msg.role == "assistant":
            action = _parse_action(msg.content)
            if action is not None and "tool_calls" in action:
                calls = []
                for i, call in enumerate(action["tool_calls"]):
                    call_id = f"call_{turn}_{i}"
                    name = str(call.get("name", ""))
                    pending.append((call_id, name))
                    arguments = json.dumps(call.get("arguments", {}), ensure_ascii=False)
                    calls.append(
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": arguments},
                        }
                    )
                out.append({"role": "assistant", "content": None, "tool_calls": calls})
            elif action is not None:
                out.append({"role": "assistant", "content": _final_content(action["final"])})
            else:
                out.append({"role": "assistant", "content": msg.content})
        elif msg.role == "tool":
            match = next((p for p in pending if p[1] == msg.name), None)
            if match is None and pending:
                match = pending[0]
            if match is None:
                # A tool result with no call to answer: keep the information as user text.
                out.append({"role": "user", "content": f"[{msg.name or 'tool'}] {msg.content}"})
                continue
            pending.remove(match)
            out.append({"role": "tool", "tool_call_id": match[0], "content": msg.content})
        else:
            out.append({"role": msg.role, "content": msg.content})
    return out


def tools_to_openai(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Function tool definitions for ``tools``."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
            },
        }
        for t in tools
    ]


@dataclass(frozen=True)
class WireOptions:
    """How requests are shaped for a given endpoint."""

    model: str
    #: Ask for ``strict`` structured output (OpenAI rejects schemas outside its strict subset).
    strict_output: bool = True
    #: Name given to the final-output schema in ``response_format``.
    output_name: str = "final_output"
    extra_body: Mapping[str, Any] = field(default_factory=dict)


def build_body(request: StepRequest, options: WireOptions, *, stream: bool) -> dict[str, Any]:
    """The JSON body of a ``POST /chat/completions`` for one step."""
    body: dict[str, Any] = {
        "model": options.model,
        "messages": messages_to_openai(request.messages, request.instructions),
    }
    if request.tools:
        body["tools"] = tools_to_openai(request.tools)
    if request.output_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": options.output_name,
                "schema": request.output_schema,
                "strict": options.strict_output,
            },
        }
    for key in FORWARDED_SETTINGS:
        if key in request.settings:
            body[key] = request.settings[key]
    # The embedded engine's name for the token cap, so one settings dict serves both back-ends.
    if "max_new_tokens" in request.settings and "max_tokens" not in body:
        body["max_tokens"] = request.settings["max_new_tokens"]
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    body.update(options.extra_body)
    return body


def _arguments(name: str, raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, str):
        raise ModelResponseError(
            f"tool call {name!r}: arguments must be a JSON string, got {raw!r}"
        )
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ModelResponseError(
            f"tool call {name!r}: arguments are not valid JSON ({exc.msg} at char {exc.pos}): {raw[:200]!r}",
            body=raw,
        ) from exc
    if not isinstance(value, dict):
        raise ModelResponseError(
            f"tool call {name!r}: arguments must be a JSON object, got {raw[:200]!r}"
        )
    return value


def action_from_message(
    message: Mapping[str, Any],
    *,
    output_schema: Mapping[str, Any] | None,
    finish_reason: str | None = None,
) -> Action:
    """Turn an assistant message (``content`` and/or ``tool_calls``) into an :class:`Action`."""
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise ModelResponseError(f"'tool_calls' must be a list, got {raw_calls!r}", body=message)
    calls = []
    for raw in raw_calls:
        fn = raw.get("function") if isinstance(raw, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ModelResponseError(f"tool call without a function name: {raw!r}", body=message)
        name = fn["name"]
        calls.append(
            ToolCall(
                name=name,
                arguments=_arguments(name, fn.get("arguments")),
                id=str(raw.get("id") or ""),
            )
        )
    if calls:
        return Action(tool_calls=tuple(calls))
    content = message.get("content")
    if content is None:
        refusal = message.get("refusal")
        if refusal:
            raise ModelResponseError(f"the model refused: {refusal}", body=message)
        raise ModelResponseError("the reply has neither content nor tool calls", body=message)
    if not isinstance(content, str):
        raise ModelResponseError(
            f"'content' must be a string, got {type(content).__name__}", body=message
        )
    if output_schema is None:
        return Action(final=content, is_final=True)
    try:
        value = json.loads(content)
    except json.JSONDecodeError as exc:
        hint = " (the reply was cut off by max_tokens)" if finish_reason == "length" else ""
        raise ModelResponseError(
            f"structured output is not valid JSON{hint}: {exc.msg} at char {exc.pos}: {content[:200]!r}",
            body=message,
        ) from exc
    return Action(final=value, is_final=True)


def action_text(action: Action) -> str:
    """The canonical action JSON (what the runtime stores as the assistant turn)."""
    if action.is_final:
        return format_final(action.final)
    return format_tool_calls([(c.name, c.arguments) for c in action.tool_calls])


def parse_completion(
    body: Any, *, output_schema: Mapping[str, Any] | None
) -> tuple[Action, dict[str, Any]]:
    """(action, usage dict) from a non-streamed chat completion body."""
    if not isinstance(body, Mapping):
        raise ModelResponseError(f"expected a JSON object, got {type(body).__name__}", body=body)
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ModelResponseError("the reply has no 'choices'", body=body)
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        raise ModelResponseError("choices[0] has no 'message' object", body=body)
    action = action_from_message(
        message, output_schema=output_schema, finish_reason=choice.get("finish_reason")
    )
    usage = body.get("usage")
    return action, dict(usage) if isinstance(usage, Mapping) else {}


@dataclass
class StreamAccumulator:
    """Folds ``chat.completion.chunk`` objects into one assistant message."""

    content: str = ""
    #: index → {"id", "name", "arguments"}
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    model: str = ""

    def add(self, chunk: Any) -> None:
        """Fold one chunk in; raise :class:`ModelResponseError` on a chunk of the wrong shape."""
        if not isinstance(chunk, Mapping):
            raise ModelResponseError(f"stream chunk is not a JSON object: {chunk!r}", body=chunk)
        if "error" in chunk:
            raise ModelResponseError(
                f"the stream reported an error: {chunk['error']!r}", body=chunk
            )
        self.model = str(chunk.get("model") or self.model)
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = dict(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
            delta = choice.get("delta") or {}
            if not isinstance(delta, Mapping):
                raise ModelResponseError(f"stream delta is not an object: {delta!r}", body=chunk)
            if isinstance(delta.get("content"), str):
                self.content += delta["content"]
            for part in delta.get("tool_calls") or []:
                index = part.get("index", 0) if isinstance(part, Mapping) else None
                if not isinstance(index, int):
                    raise ModelResponseError(
                        f"tool call delta without an index: {part!r}", body=chunk
                    )
                slot = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = part.get("id") or slot["id"]
                fn = part.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""

    def draft(self) -> str:
        """The partial action so far, in the runtime's action-JSON layout."""
        if self.calls:
            parts = [
                f'{{"name":{json.dumps(c["name"])},"arguments":{c["arguments"]}'
                for _, c in sorted(self.calls.items())
            ]
            return '{"tool_calls":[' + "},".join(parts)
        return self.content

    def message(self) -> dict[str, Any]:
        """The accumulated assistant message."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.calls:
            msg["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for _, c in sorted(self.calls.items())
            ]
        return msg
