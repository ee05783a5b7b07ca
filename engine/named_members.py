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

from .call_coverage import action_calls, conversation_text, says, with_arguments, with_calls
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
    pairs: list[tuple[str, str]] = []

    def named(
        name: str, written: str, properties: Mapping[str, Any], new: dict[str, Any]
    ) -> str | None:
        members = properties[name].get("enum")
        if not isinstance(members, list) or written not in members or says(said, written):
            return None
        found = [m for m in members if isinstance(m, str) and m and says(request, m)]
        if len(found) != 1 or found[0] in new.values():
            return None
        pairs.append((written, found[0]))
        return found[0]

    mended = with_arguments(calls, tools, named)
    action = with_calls(text, mended, schema) if pairs else None
    return None if action is None else (action, pairs)
