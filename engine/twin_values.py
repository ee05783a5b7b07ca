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
The same reading puts an amount and an id back in their slots: "can I get
56.90 EUR back for 230121?" got ``"id": "230121", "sum": 230121``, "Refnud
202.83 for my purcahse 4920" ``"id": "202.83", "sum": 202.83``. Of the two
numbers (the twins' and the request's one free number, or the two the slots
swapped), the one with cents goes to the numeric slot and the other to the id;
where neither or both have cents, nothing is guessed.

Pure text work, after decoding; part of ``restore_near_copies``
(docs/constraints.md, "Twin values").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .argument_fit import ID_NAME, value_kind
from .call_coverage import action_calls, as_said, call_values, holds, request_values, with_calls
from .chat_template import ChatMessage
from .tool_relevance import same_word, words

#: A number as a request writes one, cents and all.
_NUMBER = re.compile(r"\d+(?:\.\d+)?")

#: The words that name a parameter for a host.
HOST_WORDS = ("host", "hostname", "server", "machine", "node")


def restore_twins(
    text: str,
    messages: Sequence[ChatMessage],
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[tuple[str, str]]] | None:
    """The action ``text`` with the wrong one of each pair of twin arguments given
    the request's one free value, and an amount and an id put back in their
    slots, with the (written, restored) pairs; None when there is nothing to
    restore (or ``messages`` does not end with the request, or the action left
    breaks ``schema``)."""
    calls = action_calls(text)
    if not calls or not messages or messages[-1].role != "user":
        return None
    request = messages[-1].content
    pairs: list[tuple[str, str]] = []
    for mend in (_host_twins, _amount_and_id):
        found = mend(calls, request)
        if found is not None:
            calls, more = found
            pairs += more
    action = with_calls(text, calls, schema) if pairs else None
    return None if action is None else (action, pairs)


def _host_twins(
    calls: list[dict[str, Any]], request: str
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]] | None:
    """The first pair of twins with one slot named for a host given the request's
    one free value (see the module docstring), and the pair; None when none."""
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
    return (mended_calls, pairs) if pairs else None


def _amount_and_id(
    calls: list[dict[str, Any]], request: str
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]] | None:
    """An amount with cents is no id: where a call's id slot and numeric slot hold
    the same number and the request gives one number no argument holds, or hold
    each other's numbers, the one with a fraction goes to the numeric slot."""
    numbers = [v for v in dict.fromkeys(request_values(request)) if _NUMBER.fullmatch(v)]
    held = call_values(calls)
    free = [v for v in numbers if not holds(held, v)]
    pairs: list[tuple[str, str]] = []
    mended_calls = []
    for call in calls:
        arguments = call.get("arguments")
        slots = _id_and_amount(arguments) if isinstance(arguments, Mapping) else None
        if slots is None:
            mended_calls.append(call)
            continue
        id_slot, amount_slot = slots
        written_id, written_amount = arguments[id_slot], as_said(arguments[amount_slot])
        if written_id == written_amount and len(free) == 1:
            candidates = [written_id, free[0]]  # twins: one of them is the free number
        elif written_id in numbers and written_amount in numbers:
            candidates = [written_id, written_amount]  # swapped
        else:
            mended_calls.append(call)
            continue
        with_cents = [c for c in candidates if "." in c]
        if len(with_cents) != 1:
            mended_calls.append(call)
            continue
        amount = with_cents[0]
        new_id = next(c for c in candidates if c != amount)
        pairs += [(a, b) for a, b in ((written_id, new_id), (written_amount, amount)) if a != b]
        new = {**arguments, id_slot: new_id, amount_slot: float(amount)}
        mended_calls.append({**call, "arguments": new})
    return (mended_calls, pairs) if pairs else None


def _id_and_amount(arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (id slot, numeric slot) of a call with exactly one string argument named
    for an id and exactly one numeric argument; None otherwise."""
    ids = [k for k, v in arguments.items() if isinstance(v, str) and ID_NAME.search(k)]
    amounts = [
        k for k, v in arguments.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    return (ids[0], amounts[0]) if len(ids) == 1 and len(amounts) == 1 else None


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
