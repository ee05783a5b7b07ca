"""List arguments that repeat a value more often than the conversation gives it.

A diffusion model writes a list's items in parallel, and two positions may
settle on the same value: ``"targets": ["api-us08", "api-us08"]`` for "reboot
app-dev-04.lan, api-us08". A string the conversation names once is meant once;
:func:`without_repeated_items` keeps each string item of a list argument as many
times as the conversation holds it (at least once) and drops the later repeats,
where the action still fits its schema. Pure text work, after decoding;
docs/constraints.md ("Redundant calls") has the measurements.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from .call_coverage import action_calls, conversation_text, with_calls
from .chat_template import ChatMessage


def without_repeated_items(
    text: str,
    messages: Sequence[ChatMessage],
    instructions: str | None = None,
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[str]] | None:
    """The action ``text`` without the repeated string items of its list arguments,
    and the values dropped; None when there is none (or the conversation ``messages``
    does not end with the request the action answers, or the action left breaks
    ``schema``).

    A string item is repeated when the list holds it more times than the
    conversation (``instructions`` and the messages' text, case aside) does,
    counting at least once; the later copies go."""
    calls = action_calls(text)
    if not calls or not messages or messages[-1].role != "user":
        return None
    said = conversation_text(messages, instructions).lower()
    dropped: list[str] = []

    def drop(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: drop(v) for k, v in value.items()}
        if not isinstance(value, list):
            return value
        seen: Counter[str] = Counter()
        kept = []
        for item in value:
            if isinstance(item, str):
                seen[item] += 1
                if seen[item] > max(1, said.count(item.lower())):
                    dropped.append(item)
                    continue
            kept.append(drop(item))
        return kept

    fixed = [{**call, "arguments": drop(call.get("arguments", {}))} for call in calls]
    action = with_calls(text, fixed, schema) if dropped else None
    return None if action is None else (action, dropped)
