"""OpenAI chat.completions ⇄ the runtime's step interface, server side.

A request becomes a :class:`~agentflow.models.base.StepRequest`: system and
developer messages become the instructions, assistant turns become action JSON
(``{"tool_calls":[...]}`` or ``{"final": ...}``), tool messages are named after
the call they answer (looked up by ``tool_call_id``). ``tool_choice`` and
``response_format`` shape the action schema that the engine enforces:

- ``auto`` (default): tool calls or the final answer;
- ``none``: the final answer only (tools stay visible in the prompt);
- ``required``: tool calls only; a named function: calls of that tool only;
- ``json_schema`` / ``json_object``: the final answer must match that schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import SchemaError as JSONSchemaError
from jsonschema.validators import validator_for

from agentflow.action_schema import build_action_schema
from agentflow.engine.chat_template import ChatMessage, ToolSpec, format_final, format_tool_calls
from agentflow.errors import ToolDefinitionError
from agentflow.models.base import Action, StepRequest

from .errors import bad_request
from .schemas import ChatCompletionRequest, ContentPart, Message, NamedToolChoice


@dataclass(frozen=True)
class Prepared:
    """A validated request, ready for the model."""

    step: StepRequest
    stream: bool
    include_usage: bool
    #: The final answer is structured JSON (serialize it as JSON content).
    structured: bool


def _text(content: str | list[ContentPart] | None, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for i, part in enumerate(content):
        if part.type != "text" or part.text is None:
            raise bad_request(
                f"{where}.content[{i}]: only text parts are supported, got type {part.type!r}",
                param=f"{where}.content",
            )
        parts.append(part.text)
    return "".join(parts)


def _arguments(raw: str | dict[str, Any], where: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise bad_request(
            f"{where}.function.arguments is not valid JSON: {exc.msg}", param=where
        ) from exc
    if not isinstance(value, dict):
        raise bad_request(f"{where}.function.arguments must be a JSON object", param=where)
    return value


def convert_messages(messages: Sequence[Message]) -> tuple[list[ChatMessage], str | None]:
    """(conversation, instructions) in the runtime's form."""
    system: list[str] = []
    out: list[ChatMessage] = []
    call_names: dict[str, str] = {}
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if msg.role in ("system", "developer"):
            system.append(_text(msg.content, where))
        elif msg.role == "user":
            out.append(ChatMessage("user", _text(msg.content, where)))
        elif msg.role == "assistant":
            if msg.tool_calls:
                calls = []
                for j, call in enumerate(msg.tool_calls):
                    call_names[call.id] = call.function.name
                    calls.append(
                        (
                            call.function.name,
                            _arguments(call.function.arguments, f"{where}.tool_calls[{j}]"),
                        )
                    )
                out.append(ChatMessage("assistant", format_tool_calls(calls)))
            else:
                out.append(ChatMessage("assistant", format_final(_text(msg.content, where))))
        else:  # tool
            if msg.tool_call_id is None:
                raise bad_request(
                    f"{where}: a tool message needs 'tool_call_id'", param=f"{where}.tool_call_id"
                )
            name = call_names.get(msg.tool_call_id)
            if name is None:
                raise bad_request(
                    f"{where}: tool_call_id {msg.tool_call_id!r} does not answer any earlier assistant tool call",
                    param=f"{where}.tool_call_id",
                )
            out.append(ChatMessage("tool", _text(msg.content, where), name=name))
    instructions = "\n\n".join(s for s in system if s) or None
    return out, instructions


def check_schema(schema: Mapping[str, Any], where: str) -> None:
    """400 naming ``where`` when ``schema`` is not a valid JSON Schema."""
    try:
        validator_for(schema).check_schema(schema)
    except JSONSchemaError as exc:
        path = "/".join(str(p) for p in exc.path)
        raise bad_request(
            f"{where} is not a valid JSON Schema: {exc.message}"
            + (f" (at /{path})" if path else ""),
            param=where,
        ) from exc


def _only_tool_calls(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The tool-calls branch of an action schema (for ``tool_choice`` required / named)."""
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches is None:
        if "tool_calls" in schema.get("properties", {}):
            return dict(schema)
        raise bad_request("tool_choice requires at least one tool", param="tool_choice")
    keep = [b for b in branches if "tool_calls" in b.get("properties", {})]
    if len(keep) != 1:
        raise bad_request("tool_choice requires at least one tool", param="tool_choice")
    out = dict(keep[0])
    for key in ("$defs", "definitions"):
        if key in schema:
            out[key] = schema[key]
    return out


def _output_schema(req: ChatCompletionRequest) -> dict[str, Any] | None:
    fmt = req.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return {"type": "object"}
    if fmt.json_schema is None:
        raise bad_request(
            "response_format json_schema needs a 'json_schema' object", param="response_format"
        )
    schema = fmt.json_schema.schema_
    check_schema(schema, "response_format.json_schema.schema")
    return schema


def prepare(req: ChatCompletionRequest) -> Prepared:
    """Validate a request and build the step the model takes for it."""
    if req.n != 1:
        raise bad_request("only n=1 is supported", param="n")
    if req.logprobs:
        raise bad_request("logprobs are not supported", param="logprobs")
    messages, instructions = convert_messages(req.messages)
    tools: list[ToolSpec] = []
    for i, t in enumerate(req.tools or []):
        check_schema(
            t.function.parameters, f"tools[{i}].function.parameters (tool {t.function.name!r})"
        )
        tools.append(ToolSpec(t.function.name, t.function.description, t.function.parameters))
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise bad_request("tool names must be unique", param="tools")
    output_schema = _output_schema(req)
    choice = req.tool_choice or "auto"
    callable_tools = tools
    if isinstance(choice, NamedToolChoice):
        callable_tools = [t for t in tools if t.name == choice.function.name]
        if not callable_tools:
            raise bad_request(
                f"tool_choice names {choice.function.name!r}, which is not in 'tools'",
                param="tool_choice",
            )
    elif choice == "none":
        callable_tools = []
    elif choice == "required" and not tools:
        raise bad_request("tool_choice 'required' needs at least one tool", param="tool_choice")
    try:
        schema = build_action_schema(
            callable_tools, output_schema, parallel_calls=req.parallel_tool_calls
        )
    except ToolDefinitionError as exc:
        raise bad_request(str(exc), param="tools") from exc
    if isinstance(choice, NamedToolChoice) or choice == "required":
        schema = _only_tool_calls(schema)
    settings: dict[str, Any] = {}
    max_tokens = req.max_completion_tokens or req.max_tokens
    if max_tokens is not None:
        settings["max_new_tokens"] = max_tokens
    if req.temperature is not None:
        settings["temperature"] = req.temperature
    if req.top_p is not None:
        settings["top_p"] = req.top_p
    if req.seed is not None:
        settings["seed"] = req.seed
    step = StepRequest(
        messages=tuple(messages),
        tools=tuple(tools),
        action_schema=schema,
        output_schema=output_schema,
        instructions=instructions,
        mode=req.mode,
        settings=settings,
    )
    include_usage = bool(req.stream_options and req.stream_options.include_usage)
    return Prepared(
        step=step,
        stream=req.stream,
        include_usage=include_usage,
        structured=output_schema is not None,
    )


def final_content(action: Action, *, structured: bool) -> str:
    """The assistant ``content`` for a final action."""
    if isinstance(action.final, str) and not structured:
        return action.final
    return json.dumps(action.final, ensure_ascii=False, separators=(",", ":"))


def tool_calls_out(action: Action, id_prefix: str) -> list[dict[str, Any]]:
    """OpenAI ``tool_calls`` for a tool-calls action (ids assigned when the model gave none)."""
    return [
        {
            "id": call.id or f"call_{id_prefix}_{i}",
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": json.dumps(call.arguments, ensure_ascii=False),
            },
        }
        for i, call in enumerate(action.tool_calls)
    ]
