"""The action schema of a step: ``{"tool_calls": [...]}`` | ``{"final": output}``.

The engine's ``agentflow.engine.constraints.action_schema`` is the one source of
truth (the constraint compiler and the training corpus use it). It is imported
lazily so ``import agentflow`` stays light; :func:`build_action_schema` builds the
same union itself only when the engine's constraints package is not installed
(the runtime must work with remote and test models without the engine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentflow.engine.chat_template import ToolSpec

from .errors import ToolDefinitionError


def _lift_defs(schema: Mapping[str, Any], defs: dict[str, Any], owner: str) -> dict[str, Any]:
    out = dict(schema)
    for name, sub in dict(out.pop("$defs", {})).items():
        if name in defs and defs[name] != sub:
            raise ToolDefinitionError(
                f"tool {owner!r}: model {name!r} differs from another tool's model of the same name"
            )
        defs[name] = sub
    return out


def build_action_schema(
    tools: Sequence[ToolSpec],
    output_schema: Mapping[str, Any] | None,
    *,
    parallel_calls: bool = True,
) -> dict[str, Any]:
    """JSON Schema of one step's action for ``tools`` and the final ``output_schema`` (None = text)."""
    try:
        from agentflow.engine.constraints import action_schema as engine_action_schema
    except ImportError:
        engine_action_schema = None
    if engine_action_schema is not None:
        return engine_action_schema(list(tools), output_schema, parallel_calls=parallel_calls)
    defs: dict[str, Any] = {}
    final = _lift_defs(output_schema, defs, "final") if output_schema else {"type": "string"}
    branches: list[dict[str, Any]] = []
    if tools:
        calls = [
            {
                "type": "object",
                "properties": {
                    "name": {"const": t.name},
                    "arguments": _lift_defs(t.parameters, defs, t.name),
                },
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for t in tools
        ]
        items: dict[str, Any] = calls[0] if len(calls) == 1 else {"anyOf": calls}
        array: dict[str, Any] = {"type": "array", "items": items, "minItems": 1}
        if not parallel_calls:
            array["maxItems"] = 1
        branches.append(
            {
                "type": "object",
                "properties": {"tool_calls": array},
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
    schema: dict[str, Any] = branches[0] if len(branches) == 1 else {"anyOf": branches}
    if defs:
        schema = {**schema, "$defs": defs}
    return schema
