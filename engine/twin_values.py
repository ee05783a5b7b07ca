"""A value written into two slots of one call, one of them named for a host.

"how is node-exporter doing on search05" asks for a service's status on a
host, and the model wrote the service into both slots: ``"machine":
"node-exporter", "name": "node-exporter"``. A value said once fills one slot,
so one of the two is wrong, and the request's one value that no argument
holds (``search05``) belongs in it. Which one is read from how English places
a host: after *on*, *at* or *from* ("doing on search05", "logs from db",
"cycle celery at gw-20"). Where the free value stands there it goes to the
slot named for a host (*host*, *hostname*, *server*, *machine*, *node*);
elsewhere, to the other slot.

:func:`restore_twins` does this only where both slots are strings, exactly one
of them is named for a host, the request holds exactly one free value and it
is a word rather than a number, and the mended action still fits its schema.
Pure text work, after decoding; part of ``restore_near_copies``
(docs/constraints.md, "Twin values").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .argument_fit import value_kind
from .call_coverage import action_calls, call_values, holds, request_values, with_calls
from .chat_template import ChatMessage
from .tool_relevance import same_word, words

#: The words that name a parameter for a host.
HOST_WORDS = ("host", "hostname", "server", "machine", "node")


def restore_twins(
    text: str,
    messages: Sequence[ChatMessage],
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[tuple[str, str]]] | None:
    """The action ``text`` with the wrong one of each pair of twin arguments given
    the request's one free value, and the (written, restored) pairs; None when
    there is nothing to restore (or ``messages`` does not end with the request,
    or the action left breaks ``schema``)."""
    calls = action_calls(text)
    if not calls or not messages or messages[-1].role != "user":
        return None
    request = messages[-1].content
    held = call_values(calls)
    free = [v for v in dict.fromkeys(request_values(request)) if not holds(held, v)]
    if len(free) != 1 or value_kind(free[0]) != "text":
        return None
    value = free[0]
    placed = re.search(rf"\b(?:on|at|from)\s+{re.escape(value)}(?![\w-])", request, re.I)
    pairs: list[tuple[str, str]] = []
    mended_calls = []
    for call in calls:
        arguments = call.get("arguments")
        pair = _twins(arguments) if isinstance(arguments, Mapping) else None
        if pair is None or pairs:
            mended_calls.append(call)
            continue
        host, other = pair
        slot = host if placed else other
        pairs.append((arguments[slot], value))
        mended_calls.append({**call, "arguments": {**arguments, slot: value}})
    action = with_calls(text, mended_calls, schema) if pairs else None
    return None if action is None else (action, pairs)


def _twins(arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (host slot, other slot) of the one pair of string arguments holding the
    same value with exactly one of them named for a host; None otherwise."""
    names = [k for k, v in arguments.items() if isinstance(v, str)]
    found = [
        (a, b)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if arguments[a] == arguments[b] and _names_host(a) != _names_host(b)
    ]
    if len(found) != 1:
        return None
    a, b = found[0]
    return (a, b) if _names_host(a) else (b, a)


def _names_host(name: str) -> bool:
    return any(same_word(w, h) for w in words(name) for h in HOST_WORDS)
