"""Optional arguments the model filled with values nobody gave.

The model fills optional parameters it was not asked about: ``"max_retries":
383749``, ``"timeout": 14``, ``"region": "urgent"``, a ticket's ``"level":
"high"`` for "ticket please: "Disk full on web-qa"". A required argument must
stay whatever its value, and so must a reason's member, which is read from a
phrase ("ordered by mistake" is ``other``); but an optional string, number or
``enum`` member the conversation holds nowhere as a whole word
(``3`` is no word of "INV-2023-5427") was made up, and so was one that repeats
a required argument of its call (a ticket's title as its ``locale`` too): a
value said once fills one slot, and so was a string in a slot named for an
e-mail, a version or a path (:func:`~.slot_kinds.slot_kind`) that is none
(``"directory": "free"`` for "free space check for mq-dev"). A call without it
does what was asked.
:func:`without_made_up_options` drops those arguments, where the action still
fits its schema. Pure text work, after decoding; docs/constraints.md
("Made-up options") has the measurements.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .call_coverage import (
    DEPENDENT,
    action_calls,
    as_said,
    call_values,
    clauses,
    conversation_text,
    says,
    with_calls,
)
from .chat_template import ChatMessage, ToolSpec
from .constraints.copy_choices import CHATTER_WORDS
from .reason_values import reason_parameter, request_reasons
from .slot_kinds import is_of_kind, slot_kind
from .tool_relevance import STOP_WORDS


def without_made_up_options(
    text: str,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    instructions: str | None = None,
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[str]] | None:
    """The action ``text`` without its made-up optional arguments, and their names
    (``tool.argument``); None when it has none (or the conversation ``messages``
    holds no request, or the action left breaks ``schema``).

    A made-up option is a top-level argument that its tool (in ``tools``) does not
    require, is no ``const`` and not the tool's ``enum`` reason (nor any ``enum`` of a
    call for a clause that gives a reason: :func:`~.reason_values.request_reasons`),
    whose value is a string
    or a number (not a boolean) that the conversation (``instructions`` and the
    messages' text, case aside) holds nowhere as a whole word
    (:func:`~.call_coverage.says`), a list of strings none of which it holds, a
    value a required argument of the call holds, a string of another kind than
    the one its slot is named for, or a word the request says only as chatter
    (``"region": "urgent"`` for "it's kind of urgent"; not an ``enum`` member:
    "mark it urgent" says it). After a tool result (``messages`` not ending
    with the request), a string or number it does not hold may be the model's
    reading of the result, and is kept."""
    calls = action_calls(text)
    if not calls or not any(m.role == "user" for m in messages):
        return None
    said = conversation_text(messages, instructions).lower()
    # after a tool result, a value may be the model's reading of it ("other" for
    # "changed my mind"): only repeats, lists and values of another kind are read
    after_request = messages[-1].role == "user"
    free = {tool.name: _free_options(tool) for tool in tools}
    # a reason's member is read from its phrase ("ordered by mistake" is "other"),
    # whatever its parameter is named: no enum of a call for a clause that gives a
    # reason is made up
    reasons = _reason_clauses(messages[-1].content) if after_request else []
    specs = {tool.name: (tool.parameters or {}).get("properties") or {} for tool in tools}
    dropped: list[str] = []
    kept_calls = []
    for call in calls:
        arguments = call.get("arguments")
        if not isinstance(arguments, Mapping):
            kept_calls.append(call)
            continue
        kept = {}
        for_reason = _serves(call, reasons)
        for name, value in arguments.items():
            options = free.get(call.get("name"), set())
            spec = specs.get(call.get("name"), {}).get(name)
            if (
                name in options
                and not (for_reason and _bounded(spec))
                and (
                    _made_up(value, said, strings=after_request)
                    or (
                        after_request
                        and not _bounded(spec)
                        and _chatter(value, messages[-1].content)
                    )
                    or _repeats(value, arguments, options)
                    or _wrong_kind(name, value, spec)
                )
            ):
                dropped.append(f"{call.get('name')}.{name}")
            else:
                kept[name] = value
        kept_calls.append({**call, "arguments": kept})
    action = with_calls(text, kept_calls, schema) if dropped else None
    return None if action is None else (action, dropped)


def _reason_clauses(request: str) -> list[str]:
    """The clauses of ``request`` (lower-cased) that give a reason, a clause that only
    gives one ("… for WB6535? SINCE IT WAS not what I ordered") with the one before."""
    found: list[str] = []
    parts = clauses(request)
    for i, clause in enumerate(parts):
        if request_reasons(clause):
            led = DEPENDENT.match(clause) is not None and i > 0
            found.append(f"{parts[i - 1]} {clause}".lower() if led else clause.lower())
    return found


def _serves(call: Mapping[str, Any], reasons: Sequence[str]) -> bool:
    """True when an argument of ``call`` holds a value one of the ``reasons`` clauses says."""
    values = [as_said(v) for v in call_values([call])]
    return any(says(clause, v) for clause in reasons for v in values if v)


def _free_options(tool: ToolSpec) -> set[str]:
    """The parameters of ``tool`` that are not required, not a ``const`` and not the
    tool's reason written as a plain ``enum`` (:func:`~.reason_values.reason_parameter`:
    a reason's member is read from a phrase, "ordered by mistake" is ``other``, and
    the phrases are more than :func:`~.reason_values.request_reasons` reads: "(not
    what I ordered)"). A free string reason nobody gave is made up like any other,
    and so is an optional reason (``anyOf`` with ``null``) where the request gives
    no reason, as before."""
    parameters = tool.parameters or {}
    required = set(parameters.get("required", ()))
    reason = reason_parameter(tool)
    return {
        name
        for name, spec in parameters.get("properties", {}).items()
        if name not in required
        and "const" not in spec
        and not (reason is not None and reason[0] == name and "enum" in spec)
    }


def _bounded(spec: Any) -> bool:
    """True for a parameter ``spec`` bounded to an ``enum`` (alone or as a branch)."""
    if not isinstance(spec, Mapping):
        return False
    return "enum" in spec or any(_bounded(b) for b in spec.get("anyOf", ()))


def _made_up(value: Any, said: str, *, strings: bool = True) -> bool:
    """A list of strings none of which is said, or (``strings``) a string or number
    that is not said."""
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return not any(says(said, v) for v in value)
    if not strings or isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return False
    return not says(said, as_said(value))


def _chatter(value: Any, request: str) -> bool:
    """True for a string the request says only as chatter: a stop or chatter word
    each time after another ("it's kind of *urgent*"), never on its own ("(urgent)",
    "level urgent")."""
    if not isinstance(value, str):
        return False
    word = value.lower()
    if word not in STOP_WORDS and word not in CHATTER_WORDS:
        return False
    lowered = request.lower()
    found = list(re.finditer(rf"(?<![\w(]){re.escape(word)}(?!\w)", lowered))
    for match in found:
        before = lowered[: match.start()].split()
        if not before or before[-1].strip(".,") not in STOP_WORDS | CHATTER_WORDS:
            return False
    return bool(found)


def _repeats(value: Any, arguments: Mapping[str, Any], options: set[str]) -> bool:
    """True when one of ``arguments`` that is not an option (a required one, an enum)
    holds the same string or number ``value`` (``383749`` and ``"383749"`` alike): of
    two options that repeat each other, neither can be told for the made-up one."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return False
    return any(
        as_said(other) == as_said(value)
        for key, other in arguments.items()
        if key not in options
        and isinstance(other, (str, int, float))
        and not isinstance(other, bool)
    )


def _wrong_kind(name: str, value: Any, spec: Any) -> bool:
    """True for a string in a slot named for an e-mail, a version or a path that is
    no value of that kind."""
    if not isinstance(value, str) or not isinstance(spec, Mapping):
        return False
    kind = slot_kind(name, spec)
    return kind is not None and not is_of_kind(value, kind)
