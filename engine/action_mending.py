"""The text checks that mend a finished action, in the order they must run.

After an action is decoded (and its follow-up merged, :mod:`.call_coverage`),
three checks read it against the conversation: calls of one tool that share
out one list the request gives become one (:mod:`.list_calls`), redundant calls
go (:func:`~.call_coverage.without_redundant_calls`), and so do the repeats of a
value in a list argument (:mod:`.repeated_items`); list arguments become the
lists the request gives (:mod:`.listed_values`), values written almost right
are restored (:mod:`.near_copies`; numbers: :mod:`.near_numbers`; arguments
named for an e-mail, a version or a path that hold something else:
:mod:`.slot_kinds`; enum members the request names: :mod:`.named_members`;
the reasons the request gives: :mod:`.reason_values`; a value written into a
host slot and its neighbour: :mod:`.twin_values`), and optional arguments
nobody gave are dropped (:mod:`.made_up_options`; flags the request says
nothing about: :mod:`.made_up_flags`). The order is part of the rule: a value
restored before the redundant calls are found would make a wrong call look like
one that serves the request. :func:`mend_action` runs them in that order for
every caller (``EmbeddedModel``, ``agentflow eval``) and says what each changed;
where values were restored, the redundant calls are looked for once more, as a
miscopy the first look took for a new value ("lmartin@corp") may have become a
repeat.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from .call_coverage import action_calls, without_redundant_calls
from .chat_template import ChatMessage, ToolSpec
from .list_calls import merged_list_calls
from .listed_values import complete_lists
from .made_up_flags import without_made_up_flags
from .made_up_options import without_made_up_options
from .named_members import restore_named_members
from .near_copies import restore_near_copies
from .near_numbers import restore_near_numbers
from .reason_values import restore_reasons
from .repeated_items import without_repeated_items
from .slot_kinds import restore_slot_kinds
from .twin_values import restore_twins

T = TypeVar("T")

#: How a note names the calls joined into one that shares out the same list (then
#: the names of the calls joined away).
JOINED = "joined calls sharing a list:"
#: How a note names the redundant calls dropped (then their names).
REDUNDANT = "dropped redundant calls:"
#: How a note names the repeated list items dropped (then their values).
REPEATED = "dropped repeated items:"
#: How a note names the lists completed (then written → made).
LISTED = "completed lists:"
#: How a note names the near copies restored (then written → restored).
RESTORED = "restored near copies:"
#: How a note names the made-up options dropped (then tool.argument).
MADE_UP = "dropped made-up options:"


def mend_action(
    text: str,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    instructions: str | None = None,
    schema: Mapping[str, Any] | None = None,
    *,
    drop_redundant_calls: bool = True,
    restore_copies: bool = True,
    drop_made_up_options: bool = True,
) -> tuple[str, list[str]]:
    """``text`` after the checks asked for, and a note for each that changed it
    (``JOINED``, ``REDUNDANT``, ``REPEATED``, ``LISTED``, ``RESTORED``, ``MADE_UP`` and
    what they changed); ``restore_copies`` completes lists too; ``drop_redundant_calls``
    joins calls sharing out a list and drops repeated list items too."""
    notes: list[str] = []

    def drop_redundant(text: str) -> str:
        kept = without_redundant_calls(text, messages, instructions, schema)
        if kept is None:
            return text
        names = Counter(c["name"] for c in action_calls(text) or [])
        names.subtract(c["name"] for c in action_calls(kept) or [])
        notes.append(f"{REDUNDANT} {', '.join(sorted(names.elements()))}")
        return kept

    if drop_redundant_calls:
        merged = merged_list_calls(text, messages, schema)
        if merged is not None:
            text, names = merged
            notes.append(f"{JOINED} {', '.join(names)}")
        text = drop_redundant(text)
        repeats = without_repeated_items(text, messages, instructions, schema)
        if repeats is not None:
            text, values = repeats
            notes.append(f"{REPEATED} {', '.join(values)}")
    if restore_copies:
        listed = complete_lists(text, messages, schema)
        if listed is not None:
            text, lists = listed
            notes.append(f"{LISTED} " + ", ".join(f"{a} → {b}" for a, b in lists))
        restores: tuple[Callable[[str], tuple[str, list[tuple[str, str]]] | None], ...] = (
            lambda t: restore_near_copies(t, messages, instructions, schema),
            lambda t: restore_near_numbers(t, messages, instructions, schema),
            lambda t: restore_slot_kinds(t, messages, tools, schema),
            lambda t: restore_named_members(t, messages, tools, instructions, schema),
            lambda t: restore_reasons(t, messages, tools, schema),
            lambda t: restore_twins(t, messages, schema),
        )
        text, restored = _each(text, restores)
        if restored:
            notes.append(f"{RESTORED} " + ", ".join(f"{a} → {b}" for a, b in restored))
            if drop_redundant_calls:
                # a miscopy kept as a new value ("lmartin@corp") may now repeat a
                # call; this second look can only drop calls, never keep one
                text = drop_redundant(text)
    if drop_made_up_options:
        drops: tuple[Callable[[str], tuple[str, list[str]] | None], ...] = (
            lambda t: without_made_up_options(t, messages, tools, instructions, schema),
            lambda t: without_made_up_flags(t, messages, tools, schema),
        )
        text, names_dropped = _each(text, drops)
        if names_dropped:
            notes.append(f"{MADE_UP} {', '.join(names_dropped)}")
    return text, notes


def _each(
    text: str, checks: Sequence[Callable[[str], tuple[str, list[T]] | None]]
) -> tuple[str, list[T]]:
    """``text`` through each of ``checks`` in turn (None: unchanged), and what they changed."""
    changed: list[T] = []
    for check in checks:
        found = check(text)
        if found is not None:
            text, what = found
            changed += what
    return text, changed
