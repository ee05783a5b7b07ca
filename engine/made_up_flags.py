"""Optional flags set where the request says nothing about them.

The model sets optional booleans nobody asked about: "auth-prod, node-13 &
edge-9 need a reboot" gets ``"immediate": true``, "cancel YW8389 for me" gets
``"email_customer": true``. A flag is owed to words of the request ("and send a
confirmation", "forcefully", "without notifying anyone"); where the request's
part that the call serves has none, the flag is made up, and a call without it
does what was asked.

That part is each clause (:func:`~.call_coverage.clauses`) holding one of the
call's values, with the clauses that follow it and hold no value ("cancel 9505
for me *and send a confirmation*"). Its words that say nothing about a flag are:
the call's values, stop and chatter words, the words of the tool's name and
description and of its other parameters' names and descriptions, the first
word of a clause that holds values, which names the action ("*cancel* YW8389",
"*restart* hosts a, b", "a, b need a *reboot*"; "*force* reboot web-1" keeps
its flag, since "reboot" is left), and a plural noun right before a list the
clause gives, which names the list's items ("restart *hosts* a, b"). A flag is said before its verb seldom
enough that this reading is the safe one. :func:`without_made_up_flags` drops
an optional boolean only where no other word is left. Pure text work, after
decoding; docs/constraints.md ("Made-up flags") has the measurements.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .call_coverage import action_calls, call_values, clause_values, clauses, holds, with_calls
from .chat_template import ChatMessage, ToolSpec
from .constraints.copy_choices import CHATTER_WORDS
from .listed_values import request_lists
from .tool_relevance import request_words, same_word, tool_words, words

_LETTERS = re.compile(r"[^\W\d_]+")


def without_made_up_flags(
    text: str,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[str]] | None:
    """The action ``text`` without the optional booleans its request says nothing
    about, and their names (``tool.argument``); None when it has none (or the
    conversation ``messages`` does not end with the request the action answers,
    or the action left breaks ``schema``)."""
    calls = action_calls(text)
    if not calls or not messages or messages[-1].role != "user":
        return None
    request = messages[-1].content
    specs = {tool.name: tool for tool in tools}
    dropped: list[str] = []
    kept_calls = []
    for call in calls:
        tool = specs.get(call.get("name"))
        arguments = call.get("arguments")
        flags = _optional_flags(tool, arguments)
        if tool is None or not flags or _words_left(request, call, tool):
            kept_calls.append(call)
            continue
        dropped += [f"{tool.name}.{name}" for name in flags]
        kept_calls.append(
            {**call, "arguments": {k: v for k, v in arguments.items() if k not in flags}}
        )
    action = with_calls(text, kept_calls, schema) if dropped else None
    return None if action is None else (action, dropped)


def _optional_flags(tool: ToolSpec | None, arguments: Any) -> list[str]:
    """The arguments that are booleans its tool does not require."""
    if tool is None or not isinstance(arguments, Mapping):
        return []
    required = set((tool.parameters or {}).get("required", ()))
    return [k for k, v in arguments.items() if isinstance(v, bool) and k not in required]


def _words_left(request: str, call: Mapping[str, Any], tool: ToolSpec) -> bool:
    """Whether the part of ``request`` that ``call`` serves holds a word that may be
    about a flag; True too where no clause holds the call's values (nothing is known)."""
    held = call_values([call])
    if not held:
        return True
    known = _tool_words(tool)
    own = {w for v in held for w in _LETTERS.findall(v.lower())}
    found, serving = False, False
    for clause in clauses(request):
        values = clause_values(clause)
        if values:
            serving = any(holds(held, v) for v in values)
        if not serving:
            continue
        found = True
        left = [w for w in _content_words(clause) if w not in own]
        if values:
            left = left[1:]  # the verb
        left = [w for w in left if w not in _list_nouns(clause)]
        if any(not any(same_word(w, k) for k in known) for w in left):
            return True
    return not found


def _list_nouns(clause: str) -> set[str]:
    """The plural nouns that introduce a list of the clause: "restart *hosts* a, b"."""
    found = set()
    for items in request_lists(clause):
        before = clause[: clause.find(items[0])].split()
        if before and re.fullmatch(r"[a-z]{3,}s", before[-1].lower()):
            found.add(before[-1].lower())
    return found


def _tool_words(tool: ToolSpec) -> set[str]:
    """The words of a tool's name and description (:func:`~.tool_relevance.tool_words`)
    and of its parameters that are no booleans (names and descriptions)."""
    out = set(tool_words(tool))
    for name, spec in ((tool.parameters or {}).get("properties") or {}).items():
        if isinstance(spec, Mapping) and spec.get("type") != "boolean":
            out |= set(words(name)) | set(words(str(spec.get("description", ""))))
    return out


def _content_words(clause: str) -> list[str]:
    """The words of ``clause`` a request asks with (:func:`~.tool_relevance.request_words`),
    less chatter."""
    return [w for w in request_words(clause) if w not in CHATTER_WORDS]
