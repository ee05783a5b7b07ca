"""The action schema of one agent step: parallel tool calls or the final output.

An action is compact JSON in the chat template's format — either
``{"tool_calls":[{"name":...,"arguments":{...}}, ...]}`` or ``{"final": ...}`` —
and :func:`action_schema` is the JSON Schema the runtime constrains each step
with. Tool parameter schemas that use ``$ref`` are embedded whole under
``$defs`` (their local references rewritten), so pydantic's ``$defs`` keep working.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from ..chat_template import ToolSpec


def _has_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(_has_ref(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_ref(v) for v in node)
    return False


def _rebase(node: Any, base: str) -> Any:
    """Rewrite local ``$ref``s of a schema that now lives at JSON pointer ``base``."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if (
                key == "$ref"
                and isinstance(value, str)
                and (value == "#" or value.startswith("#/"))
            ):
                out[key] = "#" + base + value[1:]
            else:
                out[key] = _rebase(value, base)
        return out
    if isinstance(node, list):
        return [_rebase(v, base) for v in node]
    return node


def _embed(schema: Mapping[str, Any], slot: str, defs: dict[str, Any]) -> dict[str, Any]:
    """``schema`` ready to sit inside the action schema; refs go through ``$defs[slot]``."""
    body = copy.deepcopy(dict(schema))
    if not _has_ref(body):
        body.pop("$schema", None)
        return body
    body.pop("$schema", None)
    defs[slot] = _rebase(body, f"/$defs/{slot}")
    return {"$ref": f"#/$defs/{slot}"}


def _parameters(tool: ToolSpec) -> Mapping[str, Any]:
    params = tool.parameters
    if not isinstance(params, Mapping):
        raise TypeError(f"tool {tool.name!r}: parameters must be a JSON Schema object")
    kind = params.get("type", "object")
    if kind != "object":
        raise ValueError(f"tool {tool.name!r}: parameters must describe an object, not {kind!r}")
    return params


def action_schema(
    tools: Sequence[ToolSpec],
    output_schema: Mapping[str, Any] | None,
    *,
    parallel_calls: bool = True,
    max_parallel: int = 4,
) -> dict[str, Any]:
    """The JSON Schema of one step's action for ``tools`` and the final ``output_schema``.

    With ``parallel_calls`` a step may call up to ``max_parallel`` tools at once,
    otherwise exactly one. ``output_schema=None`` means a free-text (string) answer.
    With no tools only the final branch remains.
    """
    if max_parallel < 1:
        raise ValueError(f"max_parallel must be at least 1, got {max_parallel}")
    defs: dict[str, Any] = {}
    calls: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool.name, str) or not tool.name:
            raise ValueError(f"tool #{i} has no name")
        if tool.name in seen:
            raise ValueError(f"two tools are named {tool.name!r}")
        seen.add(tool.name)
        arguments = _embed(_parameters(tool), f"tool{i}_{tool.name}", defs)
        calls.append(
            {
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": arguments},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    final = (
        {"type": "string"} if output_schema is None else _embed(output_schema, "final_output", defs)
    )
    branches: list[dict[str, Any]] = []
    if calls:
        branches.append(
            {
                "type": "object",
                "properties": {
                    "tool_calls": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": max_parallel if parallel_calls else 1,
                        "items": {"anyOf": calls},
                    }
                },
                "required": ["tool_calls"],
                "additionalProperties": False,
            }
        )
    branches.append(
        {
            "type": "object",
            "properties": {"final": final},
            "required": ["final"],
            "additionalProperties": False,
        }
    )
    schema: dict[str, Any] = {"anyOf": branches}
    if defs:
        schema["$defs"] = defs
    return schema
