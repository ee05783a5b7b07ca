"""Requests that only ask: a question calls for a tool that reads, not one that changes.

A small model drawn to a request's nouns calls ``stop_order`` for "any news on my
order 6644?", ``fix_shipping_address`` for "is my package 4901 out for
delivery?" and ``reset_machines`` for "how is mysql doing on mq-us30": the tool
is about the right thing, and does something to it that nobody asked for. An
agent that cancels an order when asked how it is doing does harm; the request
says plainly that it only asks.

- A tool **changes state** when a word of its name is a verb of change (``stop``,
  ``refund``, ``fix``, ``reset``, ``send``...; :data:`CHANGE_VERBS`) and none is a
  verb of reading (``show``, ``find``, ``locate``, ``status``...;
  :data:`READ_WORDS`); a name with neither is read by its description's first
  word ("Stop an order before shipping"). A name of made-up words with no
  description is neither.
- A clause **only asks** when, its greeting and a trailing "ok?" set aside, it
  names a state (*status*, *news*, *info*, *details*, *tracking*, "know about"),
  or it is a question (it ends with ``?`` or opens with a question word: *how*,
  *is*, *do*, *any*...) that no modal verb turns into a request ("can you
  ...?", "could alice get the editor role?").
- A request is **read-only** when every clause that holds a value only asks,
  and no word of it outside quotes is a verb of change or an inflection of
  one ("cancelled", "reboot", "money *back*"): "status of 1234? and cancel
  5678" is not.

For a read-only request, each listed tool that changes state counts one misfit
in :mod:`.argument_fit` (when some listed tool does not), so that the tools
that read come first; the model still decides among them. docs/constraints.md
("Questions call tools that read") has the measurements.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .call_coverage import clause_values, clauses
from .tool_relevance import QUOTED, DescribedTool, identifier_words, same_word

_CHANGE_TEXT = """cancel void stop abort halt terminate refund reimburse pay charge transfer
    update change modify edit fix correct set switch move rename replace upgrade downgrade
    scale resize reset restart reboot cycle bounce kill reload power kick shutdown
    deploy roll push ship release install uninstall upload apply approve reject
    grant assign revoke give add remove delete drop disable deactivate enable activate
    suspend lock unlock block unblock create open reopen close raise declare escalate file
    submit post send notify page schedule remind book write start recover redirect issue new"""
#: Verbs whose tool does something to the world, in a tool's name or its
#: description's first word.
CHANGE_VERBS = frozenset(_CHANGE_TEXT.split())
_READ_TEXT = """show get find search look lookup check list read locate track trace inspect
    fetch retrieve view query describe return measure tail download status info details
    health usage journal logs forecast weather where current recent"""
#: Words of a tool name that say it reads: a name with one reads whatever else it says.
READ_WORDS = frozenset(_READ_TEXT.split())
#: Words of a request that ask for a change besides the verbs of tools: "I want my
#: money *back*", "*use* x@y.io from now on", "*turn* off login x", "*ping* ...".
REQUEST_CHANGE_WORDS = (CHANGE_VERBS - {"new"}) | frozenset(
    ["back", "use", "put", "turn", "make", "ping", "tell", "deliver", "forget"]
)
#: Nouns that look like inflections of a verb of change: "any *news*", "out for *delivery*".
_NOT_CHANGE = frozenset(["news", "delivery", "deliveries"])
#: Words that name a state a clause asks about, whatever its form.
STATE_WORDS = frozenset(["status", "news", "info", "information", "details", "tracking"])
_QUESTION_TEXT = (
    "how what where when which who whose whether is are was were do does did any has have"
)
#: Words that open a question.
QUESTION_WORDS = frozenset(_QUESTION_TEXT.split())
#: Verbs that make a question a request ("can you void 6194?").
MODAL_VERBS = frozenset(["can", "could", "would", "will", "may", "might", "shall", "should"])

_LETTERS = re.compile(r"[A-Za-z]+")
_GREETING = re.compile(
    r"^(?:(?:hi team|hey team|hey|hi|hello|yo|greetings|quick one|good morning|"
    r"good afternoon|morning|afternoon|dear support|ok|so)[,.:!]?\s+)+",
    re.IGNORECASE,
)
#: "..., ok?" at a clause's end asks for a yes, not about a state.
_TAIL = re.compile(r"[\s,.-]*\b(?:ok|okay|right|yes|pls|please|thanks|thx)\s*\?\s*$", re.I)


def changes_state(tool: DescribedTool) -> bool:
    """True when ``tool``'s name, or failing it its description's first word, is a
    verb of change (see the module's docstring)."""
    name = identifier_words(tool.name)
    if any(w in READ_WORDS for w in name):
        return False
    if any(w in CHANGE_VERBS for w in name):
        return True
    first = _LETTERS.findall((tool.description or "").lower())[:1]
    return bool(first) and first[0] in CHANGE_VERBS


def only_asks(clause: str) -> bool:
    """True when ``clause`` asks about a state or is a question, not a request."""
    clause = _TAIL.sub("", clause.strip())
    text = _GREETING.sub("", clause)
    said = [w.lower() for w in _LETTERS.findall(text)]
    if not said:
        return False
    if any(w in STATE_WORDS for w in said) or "know about" in text.lower():
        return True
    if any(w in MODAL_VERBS for w in said):
        return False
    return clause.endswith("?") or said[0] in QUESTION_WORDS


def says_change(request: str) -> bool:
    """True when a word of ``request`` outside quotes is a word of change or an
    inflection of one."""
    said = {w.lower() for w in _LETTERS.findall(QUOTED.sub(" ", request))} - _NOT_CHANGE
    return any(same_word(w, c) for w in said for c in REQUEST_CHANGE_WORDS)


def read_only(request: str) -> bool:
    """True when every clause of ``request`` that holds a value only asks and no word
    of it asks for a change (see the module's docstring)."""
    if says_change(request):
        return False
    asking = [c for c in clauses(request) if clause_values(c)]
    return bool(asking) and all(only_asks(c) for c in asking)


def changing_tools(request: str, tools: Sequence[DescribedTool]) -> set[str]:
    """The names of the listed tools that change state, when ``request`` is read-only
    and some listed tool does not (an empty set otherwise)."""
    changing = {t.name for t in tools if changes_state(t)}
    if not changing or len(changing) == len(tools) or not read_only(request):
        return set()
    return changing
