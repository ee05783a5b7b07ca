"""Enum arguments set to a member the request does not name, where it names another.

An enum is a choice the schema bounds, and the model still picks the member it
saw most in training: ``"group": "admin"`` for "assign role operator to user
ldubois". Where the conversation names the written member nowhere and the
request names exactly one other member of the same enum as a whole word
(outside its quoted text), :func:`restore_named_members` puts that member in
its place. A member named nowhere is left alone: "why": "damaged" for "it
arrived broken" is a reading, not a miscopy. Pure text work, after decoding;
part of ``restore_near_copies`` (docs/constraints.md, "Near copies").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .call_coverage import action_calls, conversation_text, says, with_calls
from .chat_template import ChatMessage, ToolSpec
from .tool_relevance import QUOTED


def restore_named_members(
    text: str,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    instructions: str | None = None,
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[tuple[str, str]]] | None:
    """The action ``text`` with each top-level enum argument the conversation
    (``instructions`` and the messages' text) does not name replaced by the one
    other member of its enum that the request names, and the (written, named)
    pairs; None when there is none (or ``messages`` does not end with the request,
    or the action left breaks ``schema``)."""
    calls = action_calls(text)
    if not calls or not messages or messages[-1].role != "user":
        return None
    said = conversation_text(messages, instructions).lower()
    request = QUOTED.sub(" ", messages[-1].content).lower()
    specs = {tool.name: tool.parameters.get("properties") or {} for tool in tools}
    pairs: list[tuple[str, str]] = []
    mended = []
    for call in calls:
        arguments = call.get("arguments")
        properties = specs.get(call.get("name"), {})
        if not isinstance(arguments, Mapping):
            mended.append(call)
            continue
        new = dict(arguments)
        for name, written in arguments.items():
            spec = properties.get(name)
            members = spec.get("enum") if isinstance(spec, Mapping) else None
            if not isinstance(written, str) or not isinstance(members, list):
                continue
            if written not in members or says(said, written):
                continue
            named = [m for m in members if isinstance(m, str) and m and says(request, m)]
            if len(named) == 1 and named[0] not in new.values():
                new[name] = named[0]
                pairs.append((written, named[0]))
        mended.append({**call, "arguments": new})
    action = with_calls(text, mended, schema) if pairs else None
    return None if action is None else (action, pairs)
