"""The embedded models' chat template and the action format of a step.

One function renders a conversation for the embedded models, so the training
corpus and the runtime can never drift apart. The layout:

    <|system|>{instructions}
    <|tools|>{one signature line per tool}{a final: line for a structured output}
    <|user|>{text}
    <|assistant|>{action JSON}<|end|>
    <|tool|>{tool name}: {result JSON}
    <|assistant|>

Tools are rendered as compact typed signatures derived from their JSON Schema,
e.g. ``get_order(order_id: string, expand?: boolean) - Look up an order.``,
which costs a small model far fewer tokens than the raw schema.

An *action* is what one step produces, always compact JSON:
``{"tool_calls":[{"name":"get_order","arguments":{"order_id":"58213"}}]}``
or ``{"final": <output>}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

PAD, MASK, END = "<|pad|>", "<|mask|>", "<|end|>"
SYSTEM, TOOLS, USER, ASSISTANT, TOOL = (
    "<|system|>",
    "<|tools|>",
    "<|user|>",
    "<|assistant|>",
    "<|tool|>",
)
#: Special tokens of the embedded tokenizer, in id order (pad = 0, mask = 1, end = 2, ...).
SPECIAL_TOKENS: tuple[str, ...] = (PAD, MASK, END, SYSTEM, TOOLS, USER, ASSISTANT, TOOL)

Role = Literal["system", "user", "assistant", "tool"]
_ROLE_TOKEN = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT, "tool": TOOL}


@dataclass(frozen=True)
class ToolSpec:
    """What the model sees of a tool: a name, a description, a JSON Schema."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


@dataclass(frozen=True)
class ChatMessage:
    """One turn. ``content`` of an assistant turn is its action JSON; ``name`` names a tool result."""

    role: Role
    content: str
    name: str | None = None


def compact_json(value: Any) -> str:
    """The canonical compact JSON text used for actions and tool results."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def format_tool_calls(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Action JSON for one or several (parallel) tool calls."""
    return compact_json(
        {"tool_calls": [{"name": name, "arguments": dict(args)} for name, args in calls]}
    )


def format_final(output: Any) -> str:
    """Action JSON for the final output."""
    return compact_json({"final": output})


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = (
                node.get(part.replace("~1", "/").replace("~0", "~"), {})
                if isinstance(node, Mapping)
                else {}
            )
        return node if isinstance(node, Mapping) else {}
    return schema


def render_type(
    schema: Mapping[str, Any] | bool, root: Mapping[str, Any] | None = None, depth: int = 0
) -> str:
    """A short human-readable type for a JSON Schema: ``string``, ``"a"|"b"``, ``[integer]``, ``{x: number}``."""
    if schema is True or schema == {}:
        return "any"
    if schema is False:
        return "never"
    root = root if root is not None else schema
    schema = _resolve(schema, root)
    if depth > 4:
        return "object"
    if "const" in schema:
        return compact_json(schema["const"])
    if "enum" in schema:
        return "|".join(compact_json(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return "|".join(render_type(s, root, depth + 1) for s in schema[key])
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return render_type(schema["allOf"][0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(render_type({**schema, "type": k}, root, depth + 1) for k in kind)
    if kind == "array":
        items = schema.get("items", True)
        return f"[{render_type(items, root, depth + 1)}]"
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if not props:
            return "object"
        return "{" + _render_fields(schema, root, depth + 1) + "}"
    if kind == "string" and "format" in schema:
        return f"string<{schema['format']}>"
    return str(kind) if kind else "any"


def _render_fields(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> str:
    required = set(schema.get("required", ()))
    parts = []
    for name, sub in schema.get("properties", {}).items():
        mark = "" if name in required else "?"
        parts.append(f"{name}{mark}: {render_type(sub, root, depth)}")
    return ", ".join(parts)


def _with_notes(
    line: str, description: Any, body: Mapping[str, Any], root: Mapping[str, Any], label: str
) -> str:
    """``line - description. {label}: name: what it is; ...`` (each part only when present)."""
    if description:
        line += f" - {' '.join(str(description).split())}"
    notes = []
    for name, sub in body.get("properties", {}).items():
        desc = _resolve(sub, root).get("description") if isinstance(sub, Mapping) else None
        if desc:
            notes.append(f"{name}: {' '.join(str(desc).split())}")
    if notes:
        line += f" {label}: " + "; ".join(notes)
    return line


def render_tool(tool: ToolSpec) -> str:
    """One signature line: ``name(arg: type, opt?: type) - description. Args: arg: what it is.``"""
    params = dict(tool.parameters)
    line = f"{tool.name}({_render_fields(params, params, 0)})"
    return _with_notes(line, tool.description, params, params, "Args")


def render_output(schema: Mapping[str, Any] | None) -> str | None:
    """The line that tells the model the shape of a structured final output:
    ``final: {status: "ok"|"warning", summary: string} - description. Fields: ...``.
    None for a plain-text answer (no schema, or a string schema)."""
    body = _resolve(schema, schema) if schema is not None else None
    if body is None or body.get("type") == "string":
        return None
    return _with_notes(
        f"final: {render_type(schema)}", body.get("description"), body, schema, "Fields"
    )


def render_prompt(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec] = (),
    *,
    instructions: str | None = None,
    output: Mapping[str, Any] | None = None,
    add_generation_prompt: bool = True,
) -> str:
    """Render a conversation in the embedded template; ends with ``<|assistant|>`` when asked.

    ``output``: the JSON Schema of a structured final output, shown as one more line
    of the tools block (:func:`render_output`); None (plain text) adds nothing."""
    out: list[str] = []
    if instructions:
        out.append(f"{SYSTEM}{instructions.strip()}\n")
    output_line = render_output(output)
    if tools or output_line:
        lines = [render_tool(t) for t in tools] + ([output_line] if output_line else [])
        out.append(TOOLS + "".join(line + "\n" for line in lines))
    for msg in messages:
        if msg.role == "assistant":
            out.append(f"{ASSISTANT}{msg.content}{END}\n")
        elif msg.role == "tool":
            out.append(f"{TOOL}{msg.name or 'tool'}: {msg.content}\n")
        else:
            out.append(f"{_ROLE_TOKEN[msg.role]}{msg.content.strip()}\n")
    if add_generation_prompt:
        out.append(ASSISTANT)
    return "".join(out)


def render_choice_prior(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec] = (),
    *,
    instructions: str | None = None,
    output: Mapping[str, Any] | None = None,
) -> str | None:
    """The conversation without its request (the last user message), rendered like
    :func:`render_prompt`: the prior that closed choices are calibrated against
    (``GenerationConfig.score_choices``). None when there is no user message."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        return None
    rest = [m for i, m in enumerate(messages) if i != users[-1]]
    return render_prompt(rest, tools, instructions=instructions, output=output)


def last_request(messages: Sequence[ChatMessage]) -> str:
    """The request: the last user message's text ("" when there is none)."""
    return next((m.content for m in reversed(messages) if m.role == "user"), "")


def called_since_request(messages: Sequence[ChatMessage]) -> list[str] | None:
    """The tools whose results came after the last user message, in order; None when
    the conversation ends with that message (nothing called yet)."""
    if not messages or messages[-1].role == "user":
        return None
    last = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    return [m.name for m in messages[last + 1 :] if m.role == "tool" and m.name]


def with_request(messages: Sequence[ChatMessage], request: str) -> list[ChatMessage] | None:
    """``messages`` with ``request`` in place of the last one when that is the request
    (a user message); None when the conversation went on after its request."""
    if not messages or messages[-1].role != "user":
        return None
    return [*messages[:-1], replace(messages[-1], content=request)]


def copy_sources(messages: Sequence[ChatMessage]) -> list[str]:
    """The texts the next action's argument values may be copied from: the request
    (the last user message) and the tool results after it
    (``ConstraintSession.copy_from``). Empty when there is no user message."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        return []
    tail = messages[users[-1] :]
    return [m.content for m in tail if m.role in ("user", "tool") and m.content]
