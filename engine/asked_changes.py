"""The change a request asks for: a tool that makes another kind of change is not it.

"can you void 740991? and send a confirmation" called ``refund_order``, "refund
everything on order 97303 because it broke" ``stop_order``, "turn off login
ines" ``reset_machines``: each request names the change it wants, and the model
picked a tool that makes another. A few kinds of change are easy to confuse
and plain to tell apart by their verbs (:data:`CHANGE_KINDS`):

- *cancel*: cancel, void, stop, abort, halt, terminate, kill;
- *refund*: refund, reimburse, repay, (money) back;
- *restart*: restart, reboot, cycle, bounce, reload, kick;
- *disable*: disable, deactivate, suspend, lock, block, revoke, "turn off".

A tool's kind is read from the words of its name, or failing them from its
description ("Stop an order before shipping": *cancel*); a request's kinds
from its words outside quotes, a verb's inflections and a swap of two of its
letters included ("canecl", "bcak"; "locked out" is no lock). Where a request
names at least one kind, each listed tool of a kind it does not name counts
one misfit in :mod:`.argument_fit`; a tool of no kind (a look-up, a tool
named in made-up words) is not touched, and neither is anything when the
request names no kind ("put CUST-1 on free"). After a tool result, a kind the
request names that no call made yet is a change still owed (:func:`owes_change`):
"refund everything on order 4604 because it defective" answered after the
order's look-up has not refunded anything. docs/constraints.md ("Argument fit",
"Requests no tool serves") has the measurements.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .read_only_requests import changes_state
from .tool_relevance import QUOTED, DescribedTool, identifier_words, letters_swapped, same_word

_KINDS_TEXT = {
    "cancel": "cancel void stop abort halt terminate kill",
    "refund": "refund reimburse repay back",
    "restart": "restart reboot cycle bounce reload kick",
    "disable": "disable deactivate suspend lock block revoke",
}
#: Kinds of change that are easy to confuse, and the verbs that name each.
CHANGE_KINDS: dict[str, frozenset[str]] = {
    kind: frozenset(verbs.split()) for kind, verbs in _KINDS_TEXT.items()
}
#: Phrases that name a kind in words none of which does alone.
_PHRASES = {"disable": re.compile(r"\b(?:turn|shut|switch)\s+off\b", re.IGNORECASE)}
#: Phrases that look like a kind and are none: "I'm *locked* out" asks for a way in.
_NOT_CHANGES = re.compile(r"\blocked\s+out\b", re.IGNORECASE)
_LETTERS = re.compile(r"[A-Za-z]+")


def tool_kinds(tool: DescribedTool) -> set[str]:
    """The kinds of change ``tool`` makes, by its name's words or else its description's."""
    found = _kinds(identifier_words(tool.name))
    return found or _kinds(_LETTERS.findall(tool.description or ""))


def asked_kinds(request: str) -> set[str]:
    """The kinds of change ``request`` names outside quotes."""
    bare = _NOT_CHANGES.sub(" ", QUOTED.sub(" ", request))
    found = _kinds(_LETTERS.findall(bare))
    return found | {kind for kind, phrase in _PHRASES.items() if phrase.search(bare)}


def unasked_changes(request: str, tools: Sequence[DescribedTool]) -> set[str]:
    """The names of the listed tools whose kinds of change ``request`` does not name,
    where it names some (an empty set otherwise)."""
    asked = asked_kinds(request)
    if not asked:
        return set()
    return {t.name for t in tools if (kinds := tool_kinds(t)) and not kinds & asked}


def owes_change(request: str, tools: Sequence[DescribedTool], called: Sequence[str]) -> bool:
    """True when ``request`` names a kind of change that none of the ``called`` tools
    made and a listed tool makes: after a look-up, the refund the request asked for
    is still to be called. False when a called tool changes state in a way no kind
    names (what it did is unknown)."""
    done = [t for t in tools if t.name in called]
    if any(changes_state(t) and not tool_kinds(t) for t in done):
        return False
    left = asked_kinds(request) - set().union(*(tool_kinds(t) for t in done))
    return bool(left) and any(tool_kinds(t) & left for t in tools)


def _kinds(words: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for word in words:
        word = word.lower()
        for kind, verbs in CHANGE_KINDS.items():
            if any(same_word(word, verb) or letters_swapped(word, verb) for verb in verbs):
                found.add(kind)
    return found
