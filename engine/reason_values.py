"""The reason a request gives, in the parameter named for one.

"Refund everything on order SO-17108 because it arrived damaged" gives its
reason after *because*; the model leaves the tool's ``why`` out, cuts it
(``"damaged"``), runs it on (``"was item not as"``), or writes it into a
neighbouring option (``"notes": "ordered by mistake"``). A reason is said the
same way whatever the tool: after *because*, *since*, *due to* or *reason:*
(and an ``it``/``it was`` that only opens the clause), up to the clause's end
(sentence punctuation, a dash, ``and then``, ``plus``), trailing chatter left
out ("since it was defective - it's kind of urgent" gives ``defective``). A
complaint about a thing named by an id, followed by a request for the money back,
gives one too: "order SO-14246 broken on arrival, I want my money back" gives
``broken on arrival``.

A reason parameter is a top-level string parameter (or ``string | null``) whose
name or description has the word *reason*, *why* or *cause*. Where the request
gives as many reasons as the action has calls with such a parameter, the n-th
reason goes to the n-th such call: as it is said for a free string, as the one
member it names for an ``enum`` ("since it was came late" names ``late``; a
reason naming no member or several is left to the model). An optional string of
the same call that holds part of the reason was the reason misplaced, and goes.
:func:`restore_reasons` does this where the action still fits its schema. Pure
text work, after decoding; part of ``restore_near_copies`` (docs/constraints.md,
"Reasons").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .call_coverage import action_calls, with_calls
from .chat_template import ChatMessage, ToolSpec
from .constraints.copy_choices import CHATTER_WORDS
from .tool_relevance import STOP_WORDS, identifier_words, names_member

#: The words that name a parameter for a reason.
REASON_WORDS = frozenset({"reason", "reasons", "why", "cause"})

#: Where a reason starts: *because*, *since*, *due to* or *reason:*, and an ``it``/``it
#: was`` that only opens its clause.
REASON_MARKER = re.compile(
    r"\b(?:because|since|due to|reason:)\s+"
    r"(?:(?:it|this|that)\s+(?:was|is|has)\s+|(?:it|this|that)['\u2019]s\s+|(?:it|this|that)\s+)?",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(
    r"[.,;!?()\n]|\s+(?:and then|and also|plus|also)\s+|\s+[-&]\s+", re.IGNORECASE
)
#: A complaint about a thing named by an id, then a request for the money back:
#: "order SO-14246 broken on arrival, I want my money back" gives the reason
#: between the id and the comma.
_COMPLAINT = re.compile(
    r"(?<!\S)\S*\d\S*\s+(?P<reason>[^\d\s,.;!?][^,.;!?]*?)\s*[,;]\s*"
    r"(?:so\s+)?(?:i|we)\s+(?:want|need|would like|['\u2019]d like)\s+(?:my|our|a|the)?\s*"
    r"(?:money\s+back|refund)\b",
    re.IGNORECASE,
)
#: The most words such a complaint's reason may have.
MAX_COMPLAINT_WORDS = 6
_LETTERS = re.compile(r"[a-z]+")


def restore_reasons(
    text: str,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[tuple[str, str]]] | None:
    """The action ``text`` with the reasons its request gives in the parameters named
    for them, and the (written, restored) pairs (``"(no why)"`` where nothing was written);
    None when there is nothing to restore (no user message, as many reasons as
    reason parameters nowhere, or the action left breaks ``schema``)."""
    calls = action_calls(text)
    asked = [m.content for m in messages if m.role == "user"]
    if not calls or not asked:
        return None
    said = request_reasons(asked[-1])
    specs = {tool.name: tool for tool in tools}
    slots = [_reason_slot(call, specs) for call in calls]
    if not said or len(said) != sum(slot is not None for slot in slots):
        return None
    reasons = iter(said)
    pairs: list[tuple[str, str]] = []
    mended_calls = []
    for call, slot in zip(calls, slots, strict=True):
        if slot is None:
            mended_calls.append(call)
            continue
        (name, members), reason = slot, next(reasons)
        value = reason if members is None else _named_member(reason, members)
        arguments = dict(call["arguments"])
        written = arguments.get(name)
        if value is None or written == value:
            mended_calls.append(call)
            continue
        required = set(specs[call["name"]].parameters.get("required", ()))
        for other, held in call["arguments"].items():
            if other not in required and other != name and _part_of(held, reason):
                del arguments[other]
        arguments[name] = value
        pairs.append((written if isinstance(written, str) else f"(no {name})", value))
        mended_calls.append({**call, "arguments": arguments})
    action = with_calls(text, mended_calls, schema) if pairs else None
    return None if action is None else (action, pairs)


def _reason_slot(
    call: Mapping[str, Any], specs: Mapping[str, ToolSpec]
) -> tuple[str, tuple[str, ...] | None] | None:
    """The call's reason parameter (:func:`reason_parameter`), if it has arguments."""
    tool = specs.get(call.get("name"))
    if tool is None or not isinstance(call.get("arguments"), Mapping):
        return None
    return reason_parameter(tool)


def request_reasons(request: str) -> list[str]:
    """The reasons ``request`` gives, in order (see the module docstring)."""
    found: list[tuple[int, str]] = []
    for m in REASON_MARKER.finditer(request):
        rest = request[m.end() :]
        end = _CLAUSE_END.search(rest)
        said = (rest[: end.start()] if end else rest).split()
        while said and (said[-1].lower() in CHATTER_WORDS or said[-1].lower() in STOP_WORDS):
            said.pop()
        if said:
            found.append((m.start(), " ".join(said)))
    for m in _COMPLAINT.finditer(request):
        said = m.group("reason").split()
        sentence = re.split(r"[.?!]", request[m.start() :], maxsplit=1)[0]
        if len(said) <= MAX_COMPLAINT_WORDS and not REASON_MARKER.search(sentence):
            found.append((m.start("reason"), " ".join(said)))
    return [reason for _, reason in sorted(found)]


def reason_parameter(tool: ToolSpec) -> tuple[str, tuple[str, ...] | None] | None:
    """The name of ``tool``'s first top-level parameter named or described for a
    reason, with its ``enum`` members (None for a free string); None when it has none."""
    for name, spec in (tool.parameters.get("properties") or {}).items():
        plain = _plain_string(spec)
        if plain is None:
            continue
        described = identifier_words(name) + _LETTERS.findall(
            (plain.get("description") or "").lower()
        )
        if REASON_WORDS & set(described):
            members = plain.get("enum")
            if members is None:
                return name, None
            if all(isinstance(m, str) for m in members):
                return name, tuple(members)
    return None


def _plain_string(spec: Any) -> Mapping[str, Any] | None:
    """``spec`` as a string schema (an optional's non-null branch, its description
    kept), or None when it takes no string."""
    if not isinstance(spec, Mapping):
        return None
    if "anyOf" in spec:
        branches = [b for b in spec["anyOf"] if isinstance(b, Mapping) and b.get("type") != "null"]
        if len(branches) != 1:
            return None
        spec = {"description": spec.get("description"), **branches[0]}
    return spec if spec.get("type") == "string" else None


def _named_member(reason: str, members: Sequence[str]) -> str | None:
    """The one of ``members`` that ``reason`` names as a word of its own, or None."""
    named = [m for m in members if names_member(reason.lower(), m.lower())]
    return named[0] if len(named) == 1 else None


def _part_of(held: Any, reason: str) -> bool:
    """True for a string of a few letters or more that the reason holds (case aside)."""
    return isinstance(held, str) and len(held) >= 3 and held.lower() in reason.lower()
