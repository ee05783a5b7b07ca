"""Argument values the model meant to copy from the request but wrote wrong.

Copy choices (:mod:`.constraints.copy_choices`) offer the request's spans whole
where a string value opens, but the model may decline them and write the value
itself: ``"11669"`` for ``#86669``, ``"kaka@shop.net"`` for ``hokafor@shop.net``.
Such a value is easy to spot afterwards: the conversation holds it nowhere, and
one of the request's values that no call holds yet is close to it.
:func:`restore_near_copies` puts that value in its place, where the action still
fits its schema. Pure text work, after decoding; docs/constraints.md ("Near
copies") has the measurements.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from .call_coverage import (
    action_calls,
    call_values,
    conversation_text,
    holds,
    request_values,
    with_calls,
)
from .chat_template import ChatMessage

#: How close (``difflib`` ratio, case aside) a written value must be to a request
#: value to be taken for a miscopy of it.
NEAR_COPY = 0.5
#: Shorter strings are left alone: too little to tell a miscopy from a choice.
MIN_LENGTH = 3


def restore_near_copies(
    text: str,
    messages: Sequence[ChatMessage],
    instructions: str | None = None,
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[tuple[str, str]]] | None:
    """The action ``text`` with its near copies restored, and the (written, restored)
    pairs; None when there is none (or the conversation ``messages`` does not end
    with the request the action answers, or the restored action breaks ``schema``).

    A near copy is an argument string of at least ``MIN_LENGTH`` characters that
    the conversation (``instructions`` and the messages' text, case aside) holds
    nowhere, within ``NEAR_COPY`` of a value of the request that no call holds;
    it becomes the closest such value, each value used once."""
    calls = action_calls(text)
    if not calls or not messages or messages[-1].role != "user":
        return None
    said = conversation_text(messages, instructions).lower()
    held = call_values(calls)
    free = [v for v in request_values(messages[-1].content) if not holds(held, v)]
    restored: list[tuple[str, str]] = []

    def restore(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: restore(v) for k, v in value.items()}
        if isinstance(value, list):
            return [restore(v) for v in value]
        if not isinstance(value, str) or len(value) < MIN_LENGTH or value.lower() in said:
            return value
        best = max(free, key=lambda v: _closeness(value, v), default=None)
        if best is None or _closeness(value, best) < NEAR_COPY:
            return value
        free.remove(best)
        restored.append((value, best))
        return best

    fixed = [{**call, "arguments": restore(call.get("arguments", {}))} for call in calls]
    action = with_calls(text, fixed, schema) if restored else None
    return None if action is None else (action, restored)


def _closeness(written: str, value: str) -> float:
    return difflib.SequenceMatcher(None, written.lower(), value.lower()).ratio()
