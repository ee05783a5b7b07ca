"""Arguments named for an e-mail, a version or a path that hold something else.

A parameter named or described for an e-mail (``emailAddress``, ``contact``), a
version (``build_version``, ``tag``) or a path (``directory``, ``mount``) says
what its value looks like, and the model still fills it with a neighbour of the
right value: ``"emailAddress": ":"``, ``"contact": "do.co"`` for "do we know
kofinovak@corp.org?", ``"build_version": "staging"`` for "push 9.22.3 of
memcached to staging", ``"directory": "urgent"`` for "disk space on mq-us-5
especially /home, it's kind of urgent". Where the request holds exactly one
value of that kind (or, of several, exactly one that no call holds yet) and the
call holds it in no argument, :func:`restore_slot_kinds` puts it there. The other way round, the
model copies an e-mail into the slot named for it *and* into a slot beside it
(``"client_id": "sofia83@inbox.dev", "emailAddress": "sofia83@inbox.dev"`` for
"set email sofia83@inbox.dev on account 36626"): the slot not named for an
e-mail gets the request's one value that no call holds; and where the two are
swapped (``"client_id": "eli.doe@mail.com", "emailAddress": "c4207"`` for "set
email eli.doe@mail.com on account c4207"), they swap back, when the value the
slot named for a kind holds is one the request gives. The e-mail and version
kinds and the words that name them are :mod:`.argument_fit`'s; a path (a word
starting with ``/``) is this module's own, as tool choice does not weigh paths.
Pure text work, after decoding; part of ``restore_near_copies``
(docs/constraints.md, "Near copies").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .argument_fit import kind_of, value_kind
from .call_coverage import (
    action_calls,
    call_values,
    holds,
    request_values,
    with_arguments,
    with_calls,
)
from .chat_template import ChatMessage, ToolSpec
from .tool_relevance import QUOTED, request_words, same_word, words

#: The words that name a parameter for a file-system path.
PATH_WORDS = ("path", "directory", "folder", "dir", "mount", "mountpoint", "file")
#: A path as a request writes one: ``/home``, ``/var/log/``, ``~/data``.
_PATH = re.compile(r"~?/[\w.@+-]+(?:/[\w.@+-]+)*/?")


def restore_slot_kinds(
    text: str,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[tuple[str, str]]] | None:
    """The action ``text`` with each string argument named for an e-mail, a
    version or a path that holds no such value replaced by the request's one value
    of that kind, and the (written, restored) pairs; None when there is none to restore (or
    ``messages`` does not end with the request, or the action left breaks
    ``schema``)."""
    calls = action_calls(text)
    if not calls or not messages or messages[-1].role != "user":
        return None
    values = list(dict.fromkeys(request_values(messages[-1].content)))
    by_kind: dict[str, list[str]] = {}
    for value in values:
        by_kind.setdefault(value_kind(value), []).append(value)
    by_kind["path"] = request_paths(messages[-1].content)
    held = call_values(calls)
    free = [v for v in values if not holds(held, v)]
    pairs: list[tuple[str, str]] = []

    def restored(
        name: str, written: str, properties: Mapping[str, Any], new: dict[str, Any]
    ) -> str | None:
        kind = slot_kind(name, properties[name])
        if kind is None:
            if len(free) == 1 and _twin(name, written, new, properties):
                pairs.append((written, free[0]))
                return free.pop()
            return None
        found = by_kind.get(kind, [])
        if len(found) > 1:  # of several, the one no call holds yet
            found = [v for v in found if v in free]
        if _kind(written) == kind or len(found) != 1:
            return None
        swapped = [k for k, v in new.items() if v == found[0] and k != name]
        if swapped:  # the value sits in a neighbour not named for it: the two swap
            other = swapped[0]
            spec = properties.get(other)
            if len(swapped) > 1 or not isinstance(spec, Mapping) or slot_kind(other, spec):
                return None
            if written not in values:
                return None
            new[other] = written
            pairs.append((found[0], written))
        pairs.append((written, found[0]))
        return found[0]

    mended = with_arguments(calls, tools, restored)
    action = with_calls(text, mended, schema) if pairs else None
    return None if action is None else (action, pairs)


def slot_kind(name: str, schema: Mapping[str, Any]) -> str | None:
    """The kind of value a string parameter is named or described for: ``"email"``
    or ``"version"`` (:func:`~.argument_fit.kind_of`), ``"path"`` (:data:`PATH_WORDS`),
    or None."""
    kind = kind_of(name, schema)
    if kind is not None or schema.get("type", "string") != "string":
        return kind
    said = words(name) + request_words(schema.get("description") or "")
    return "path" if any(same_word(w, p) for w in said for p in PATH_WORDS) else None


def request_paths(request: str) -> list[str]:
    """The paths ``request`` gives outside its quoted text (each once, in order)."""
    bare = QUOTED.sub(" ", request)
    found = []
    for m in _PATH.finditer(bare):
        path = m.group(0).rstrip(".")  # "/home." ends a sentence
        if path != "/" and _whole(bare, m.start(), m.start() + len(path)):
            found.append(path)
    return list(dict.fromkeys(found))


def _whole(text: str, start: int, end: int) -> bool:
    """True when ``text[start:end]`` stands alone: space or punctuation around it."""
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    return not (before.isalnum() or before in "/.-_:") and not (after.isalnum() or after == "/")


def is_of_kind(value: str, kind: str) -> bool:
    """True when ``value`` is a value of ``kind`` (``"email"``, ``"version"``, ``"path"``)."""
    return _kind(value) == kind


def _kind(value: str) -> str:
    """:func:`~.argument_fit.value_kind`, or ``"path"`` for a path."""
    return "path" if _PATH.fullmatch(value) else value_kind(value)


def _twin(
    name: str, written: str, arguments: Mapping[str, Any], properties: Mapping[str, Any]
) -> bool:
    """True when ``written`` (argument ``name``'s value, its slot named for no kind) is an
    e-mail or a version that another argument of the call, named for that kind, holds too."""
    kind = value_kind(written)
    if kind not in ("email", "version"):
        return False
    return any(
        other != name
        and value == written
        and isinstance(properties.get(other), Mapping)
        and kind_of(other, properties[other]) == kind
        for other, value in arguments.items()
    )
