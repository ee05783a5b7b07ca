"""The action schema of a step: ``{"tool_calls": [...]}`` | ``{"final": output}``.

The engine's :func:`agentflow.engine.constraints.action_schema` is the one source
of truth (the constraint compiler and the training corpus use it); this wrapper
turns its complaints about a tool set into :class:`ToolDefinitionError`. The
engine's constraints package exports its names lazily, so this import does not
load torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentflow.engine.chat_template import ToolSpec
from agentflow.engine.constraints.actions import action_schema

from .errors import ToolDefinitionError


def build_action_schema(
    tools: Sequence[ToolSpec],
    output_schema: Mapping[str, Any] | None,
    *,
    parallel_calls: bool = True,
) -> dict[str, Any]:
    """JSON Schema of one step's action for ``tools`` and the final ``output_schema`` (None = text)."""
    try:
        return action_schema(
            list(tools),
            dict(output_schema) if output_schema is not None else None,
            parallel_calls=parallel_calls,
        )
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(str(exc)) from exc
