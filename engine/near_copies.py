"""Argument values the model meant to copy from the request but wrote wrong.

Copy choices (:mod:`.constraints.copy_choices`) offer the request's spans whole
where a string value opens, but the model may decline them and write the value
itself: ``"11669"`` for ``#86669``, ``"kaka@shop.net"`` for ``hokafor@shop.net``.
Such a value is easy to spot afterwards: the conversation holds it nowhere as a
whole word (``"omore"`` is only part of ``omoreau``), and one of the request's
values that no *other* argument holds is close to it (the miscopy ``"591333"``
holds ``59133`` itself, which must not count). A value written with the
sentence's punctuation (``"joao."``) is one too. Where no request value is
close, a run of the request's words as long as the written value may be
(``"757 Main St"`` for "174 Main St": the street number taken from the order
id), and where nothing is close, a short value is the one value of the request
the calls left (``"207739"`` for ``GO3939``, ``"c1@inbox.dev"`` for ``c1848``). :func:`restore_near_copies` puts the request's value in its place, where
the action still fits its schema. Pure text work, after decoding;
docs/constraints.md ("Near copies", "Values mended after decoding, eleventh
pass") has the measurements.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from .call_coverage import (
    action_calls,
    call_values,
    conversation_text,
    holds,
    request_values,
    says,
    with_calls,
)
from .chat_template import ChatMessage
from .constraints.copy_choices import request_spans

#: How close (``difflib`` ratio, case aside) a written value must be to a request
#: value to be taken for a miscopy of it.
NEAR_COPY = 0.5
#: The same for a run of the request's words with as many words as the written value
#: (:func:`~.constraints.copy_choices.request_spans`): higher, as there are many more.
NEAR_SPAN = 0.6
#: A value of at most this many words that is close to nothing the request gives
#: becomes the request's one value no other argument holds, if there is exactly one
#: (``"207739"`` for "Can GO3939 be redirected to 207 Elm Street?"); longer ones may
#: be the model's own prose.
MAX_STRAY_WORDS = 3
#: Shorter strings are left alone: too little to tell a miscopy from a choice.
MIN_LENGTH = 3
#: Sentence punctuation a value may have been written with (``"joao."``).
_PUNCTUATION = ".,;:!?"


def restore_near_copies(
    text: str,
    messages: Sequence[ChatMessage],
    instructions: str | None = None,
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[tuple[str, str]]] | None:
    """The action ``text`` with its near copies restored, and the (written, restored)
    pairs; None when there is none (or the conversation ``messages`` does not end
    with the request the action answers, or the restored action breaks ``schema``).

    A near copy is an argument string of at least ``MIN_LENGTH`` characters that
    the conversation (``instructions`` and the messages' text, case aside) holds
    nowhere as a whole word, within ``NEAR_COPY`` of a value of the request that
    no other argument holds; it becomes the closest such value, each value used
    once. Failing that, within ``NEAR_SPAN`` of a run of the request's words with
    as many words (a span, as copy choices offer them) that no other argument
    holds, it becomes the closest such span; failing that, a string of at most
    ``MAX_STRAY_WORDS`` words becomes the request's one value no other argument
    holds, where there is exactly one. A string that is a request value but for
    the sentence punctuation at its ends becomes that value."""
    calls = action_calls(text)
    if not calls or not messages or messages[-1].role != "user":
        return None
    said = conversation_text(messages, instructions).lower()
    held = call_values(calls)
    values = request_values(messages[-1].content)
    used: list[str] = []
    restored: list[tuple[str, str]] = []

    @cache
    def spans() -> tuple[str, ...]:
        """The request's runs of words: read only when a value gets that far."""
        return request_spans([messages[-1].content])

    def free_for(value: str, among: Sequence[str]) -> list[str]:
        """The values ``among`` that no argument but ``value`` holds, not restored yet."""
        others = list(held)
        others.remove(value)
        return [v for v in among if v not in used and not holds(others, v)]

    def restore(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: restore(v) for k, v in value.items()}
        if isinstance(value, list):
            return [restore(v) for v in value]
        if not isinstance(value, str) or len(value) < MIN_LENGTH:
            return value
        free = free_for(value, values)
        trimmed = value.strip(_PUNCTUATION)
        same = [v for v in free if trimmed != value and v.strip(_PUNCTUATION) == trimmed]
        if same:  # trimmed as the copy choices offer the request's spans
            used.append(same[0])
            best = trimmed
        elif says(said, value):
            return value
        else:
            best = _closest(value, free, NEAR_COPY)
            if best is None:
                words = len(value.split())
                alike = [s for s in free_for(value, spans()) if len(s.split()) == words]
                best = _closest(value, alike, NEAR_SPAN)
            if best is None and len(free) == 1 and len(value.split()) <= MAX_STRAY_WORDS:
                best = free[0]  # the one value the calls left: "207739" for GO3939
            if best is None:
                return value
            used.append(best)
        restored.append((value, best))
        return best

    fixed = [{**call, "arguments": restore(call.get("arguments", {}))} for call in calls]
    action = with_calls(text, fixed, schema) if restored else None
    return None if action is None else (action, restored)


def is_near_copy(written: str, value: str) -> bool:
    """True when ``written`` may be a miscopy of ``value``: both hold at least
    ``MIN_LENGTH`` characters and they are within ``NEAR_COPY`` of each other."""
    return min(len(written), len(value)) >= MIN_LENGTH and _closeness(written, value) >= NEAR_COPY


def _closest(written: str, values: Sequence[str], least: float) -> str | None:
    """The one of ``values`` closest to ``written``, if at least ``least`` close."""
    best = max(values, key=lambda v: _closeness(written, v), default=None)
    return best if best is not None and _closeness(written, best) >= least else None


def _closeness(written: str, value: str) -> float:
    return difflib.SequenceMatcher(None, written.lower(), value.lower()).ratio()
