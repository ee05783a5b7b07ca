"""Numeric arguments the model meant to copy but wrote wrong.

"Scale gunicorn = 22" got ``"size": 222``; a refund after the order's look-up
(``"total": 52.4``) got ``"sum": 52.44``. Copy choices offer the request's
numbers whole, but the drafter may write a number digit by digit and repeat or
add one. Such a number is easy to spot afterwards: the conversation gives no
number of that value anywhere. :func:`restore_near_numbers` puts back the number
closest to it (``difflib`` ratio of their digits at least ``NEAR_NUMBER``, and no
other as close) among those the conversation gives since its last user message
(the request, and tool results after it) that no other argument holds. Pure
text work, after decoding; part of ``restore_near_copies`` (docs/constraints.md,
"Values mended after decoding, twelfth pass").
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .call_coverage import action_calls, as_said, with_calls
from .chat_template import ChatMessage

#: How close (``difflib`` ratio of the digit strings) a written number must be to a
#: number of the conversation to be taken for a miscopy of it.
NEAR_NUMBER = 0.5
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")


def restore_near_numbers(
    text: str,
    messages: Sequence[ChatMessage],
    instructions: str | None = None,
    schema: Mapping[str, Any] | None = None,
) -> tuple[str, list[tuple[str, str]]] | None:
    """The action ``text`` with its numbers written almost right restored, and the
    (written, restored) pairs; None when there is none (or no user message, or the
    restored action breaks ``schema``). Top-level numeric arguments are read
    (booleans are no numbers)."""
    calls = action_calls(text)
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    if not calls or last_user is None:
        return None
    given = {_value(n) for n in _NUMBER.findall(instructions or "")}
    given |= {_value(n) for m in messages for n in _NUMBER.findall(m.content)}
    recent = [n for m in messages[last_user:] for n in _NUMBER.findall(m.content)]
    candidates = list(dict.fromkeys(recent))
    held = {_value(v) for c in calls for v in _numbers(c.get("arguments"))}
    restored: list[tuple[str, str]] = []
    mended_calls = []
    for call in calls:
        arguments = call.get("arguments")
        if not isinstance(arguments, Mapping):
            mended_calls.append(call)
            continue
        new = dict(arguments)
        for name, written in arguments.items():
            if not _is_number(written) or written in given:
                continue
            free = [n for n in candidates if _value(n) not in held]
            best = _closest(as_said(written), free)
            if best is not None:
                new[name] = _value(best)
                held.add(_value(best))
                restored.append((as_said(written), best))
        mended_calls.append({**call, "arguments": new})
    action = with_calls(text, mended_calls, schema) if restored else None
    return None if action is None else (action, restored)


def _closest(written: str, numbers: Sequence[str]) -> str | None:
    """The one of ``numbers`` closest to ``written``, at least ``NEAR_NUMBER`` close
    and strictly closer than any other; None otherwise."""
    ranked = sorted(
        ((difflib.SequenceMatcher(None, written, n).ratio(), n) for n in numbers), reverse=True
    )
    if not ranked or ranked[0][0] < NEAR_NUMBER:
        return None
    if len(ranked) > 1 and ranked[1][0] == ranked[0][0]:
        return None
    return ranked[0][1]


def _numbers(arguments: Any) -> list[int | float]:
    if not isinstance(arguments, Mapping):
        return []
    return [v for v in arguments.values() if _is_number(v)]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _value(number: str | int | float) -> int | float:
    """A number as JSON would hold it: ``52.40`` and ``52.4`` alike, ``22.0`` as ``22``."""
    value = float(number)
    return int(value) if value.is_integer() else value
