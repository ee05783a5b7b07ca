"""List arguments that leave out, or miswrite, items of a list the request gives.

"api27, search-20, lb-qa need a reboot" gives three hosts as one list, and the
drafter, writing a list's items in parallel, may leave the last one out
(``["api27", "search-20"]``), fuse two (``"gw-eu03"`` for "app-qa-6, gw &
node-eu03") or add one of its own (``"rmalipez"``). :func:`complete_lists` finds
the lists a request gives — runs of two or more words joined by commas, ``&``
or ``and``, one of them at least a value (a digit, a hyphen, an ``@``...) —
and where a list argument holds items of one such run and nothing else that
the request gives as a value, makes the argument that run, in the request's
order. Pure text work, after decoding; docs/constraints.md ("Listed values")
has the measurements.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .call_coverage import action_calls, call_values, request_values, with_calls
from .chat_template import ChatMessage
from .constraints.copy_choices import CHATTER_WORDS
from .tool_relevance import STOP_WORDS, is_value_like

#: One item of a list: a word that may hold ``.``, ``@``, ``-``, ``/`` or ``:``
#: inside it, but neither starts nor ends with them (a full stop is the sentence's).
_ITEM = r"\w(?:[\w.@/:-]*\w)?"
#: What joins two items: a comma (and maybe ``and`` or ``&`` after it), ``&`` or ``and``.
_JOIN = r"(?:\s*,\s*(?:(?:and|&)\s+)?|\s+(?:&|and)\s+)"
_RUN = re.compile(rf"(?<![\w.@/:-]){_ITEM}(?:{_JOIN}{_ITEM})+(?![\w@/-])", re.IGNORECASE)
_SPLIT = re.compile(_JOIN, re.IGNORECASE)


def request_lists(request: str) -> list[tuple[str, ...]]:
    """The lists ``request`` gives, in order: runs of two or more items joined by
    commas, ``&`` or ``and``, with at least one value-like item ("api27, search-20,
    lb-qa", "worker & gw-stg"; not "qa and then"), greetings and politeness left
    out."""
    found: list[tuple[str, ...]] = []
    for match in _RUN.finditer(request):
        items = tuple(i for i in _SPLIT.split(match.group(0)) if i and not _chatter(i))
        if len(items) >= 2 and any(is_value_like(i) for i in items):
            found.append(items)
    return found


def _chatter(word: str) -> bool:
    """A greeting or a politeness ("greetings, auth-int-08, cache-us-4 need a
    reboot"): no item of the list that follows it."""
    return word.lower() in CHATTER_WORDS or word.lower() in STOP_WORDS


def complete_lists(
    text: str,
    messages: Sequence[ChatMessage],
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[tuple[list[str], list[str]]]] | None:
    """The action ``text`` with its list arguments made the request's lists, and the
    (written, made) pairs; None when nothing changed (or the conversation
    ``messages`` does not end with the request the action answers, or the new
    action breaks ``schema``).

    A list argument of strings becomes a list the request gives (:func:`request_lists`)
    when it holds at least one of its items, every other item it holds is none of
    the request's values (:func:`~.call_coverage.request_values`: a made-up or
    miswritten item, not another clause's value), and the run's items it lacks are
    held by no other argument of the action. Of two runs it shares items with,
    the one it shares more with; a tie changes nothing."""
    calls = action_calls(text)
    if not calls or not messages or messages[-1].role != "user":
        return None
    request = messages[-1].content
    runs = request_lists(request)
    if not runs:
        return None
    values = {v.lower() for v in request_values(request)}
    held = [v.lower() for v in call_values(calls)]
    changed: list[tuple[list[str], list[str]]] = []

    def complete(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: complete(v) for k, v in value.items()}
        if not isinstance(value, list) or not value or not all(isinstance(i, str) for i in value):
            return value
        run = _run_for(value, runs, values)
        if run is None or [i.lower() for i in run] == [i.lower() for i in value]:
            return value
        own = [i.lower() for i in value]
        others = list(held)
        for item in own:
            others.remove(item)
        if any(i.lower() in others for i in run if i.lower() not in own):
            return value  # another argument holds an item the list lacks
        changed.append((list(value), list(run)))
        return list(run)

    fixed = [{**call, "arguments": complete(call.get("arguments", {}))} for call in calls]
    action = with_calls(text, fixed, schema) if changed else None
    return None if action is None else (action, changed)


def _run_for(
    items: list[str], runs: list[tuple[str, ...]], values: set[str]
) -> tuple[str, ...] | None:
    """The run ``items`` shares most items with, where the items outside it are none
    of the request's ``values``; None when there is no such run or two tie."""
    scored: list[tuple[int, tuple[str, ...]]] = []
    for run in runs:
        members = {m.lower() for m in run}
        shared = sum(1 for i in items if i.lower() in members)
        strays = [i for i in items if i.lower() not in members]
        if shared and not any(i.lower() in values for i in strays):
            scored.append((shared, run))
    if not scored:
        return None
    scored.sort(key=lambda s: -s[0])
    if len(scored) > 1 and scored[0][0] == scored[1][0]:
        return None
    return scored[0][1]
