"""Arguments named for an e-mail or a version that hold something else.

A parameter named or described for an e-mail (``emailAddress``, ``contact``) or a
version (``build_version``, ``tag``) says what its value looks like, and the
model still fills it with a neighbour of the right value: ``"emailAddress":
":"``, ``"contact": "do.co"`` for "do we know kofinovak@corp.org?",
``"build_version": "staging"`` for "push 9.22.3 of memcached to staging". Where
the request holds exactly one value of that kind and the call holds it in no
argument, :func:`restore_slot_kinds` puts it there. The kinds and the words that
name them are :mod:`.argument_fit`'s. Pure text work, after decoding; part of
``restore_near_copies`` (docs/constraints.md, "Near copies").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .argument_fit import kind_of, value_kind
from .call_coverage import action_calls, request_values, with_calls
from .chat_template import ChatMessage, ToolSpec


def restore_slot_kinds(
    text: str,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[tuple[str, str]]] | None:
    """The action ``text`` with each string argument named for an e-mail or a
    version that holds no such value replaced by the request's one value of that
    kind, and the (written, restored) pairs; None when there is none to restore (or
    ``messages`` does not end with the request, or the action left breaks
    ``schema``)."""
    calls = action_calls(text)
    if not calls or not messages or messages[-1].role != "user":
        return None
    by_kind: dict[str, list[str]] = {}
    for value in dict.fromkeys(request_values(messages[-1].content)):
        by_kind.setdefault(value_kind(value), []).append(value)
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
            if not isinstance(written, str) or not isinstance(spec, Mapping):
                continue
            kind = kind_of(name, spec)
            found = by_kind.get(kind, []) if kind else []
            if kind is None or value_kind(written) == kind or len(found) != 1:
                continue
            if found[0] in new.values():
                continue
            new[name] = found[0]
            pairs.append((written, found[0]))
        mended.append({**call, "arguments": new})
    action = with_calls(text, mended, schema) if pairs else None
    return None if action is None else (action, pairs)
