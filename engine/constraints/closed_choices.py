"""Closed choices: the few whole strings a constraint admits at a state.

Where the action schema leaves the model a choice among a handful of string
*values* — a tool name from the tool list, an enum value — decoding them token
by token decides the whole string on its first differing token. Scoring every
candidate whole by the model's log-probability and taking the best is the exact
greedy (MAP) choice among them (docs/constraints.md, "Closed choices").

A state opens a closed choice when every byte path from it through live states
reaches an unescaped ``"`` (the end of a JSON string) within
``MAX_CHOICE_BYTES`` bytes, along at most ``MAX_CHOICES`` distinct paths, no
path is empty, and the strings are values, not object keys (a key choice, such
as ``tool_calls`` against ``final``, is structure the model decides token by
token: scored whole it did worse, docs/constraints.md — unless the session is
given a bonus for every key, ``ConstraintSession.prefer_keys``). Free text,
numbers and patterns branch past the limit at once.

Each candidate is its string content; the ``"`` and whatever is forced after
it stay with the jump-forward, except that a candidate another one extends
(``get_order``, ``get_orders``) also commits the token that ends it.
Candidates are tokenized canonically *in context* (content plus the forced
text after it), and the first token after the content is scored too, so that
such a name pays for ending where it does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .jump_forward import ForcedText

#: At most this many candidates make a closed choice (tool lists hold 2–8 tools).
MAX_CHOICES = 16
#: Longest candidate, in bytes.
MAX_CHOICE_BYTES = 64

_QUOTE = 0x22
_BACKSLASH = 0x5C


@dataclass(frozen=True)
class Candidate:
    """One string of a closed choice, as tokens."""

    #: The content as decoded text (for logs and tests).
    text: str
    #: Canonical tokens of the content: what is committed when it is chosen (with
    #: the token that ends it when another candidate extends it).
    tokens: tuple[int, ...]
    #: ``tokens`` plus the first token the constraint forces after the content:
    #: what the model scores.
    scored: tuple[int, ...]
    #: The automaton state after each token of ``tokens``.
    states: tuple[int, ...]
    #: Copy candidates (:mod:`.copy_choices`): the (token, state after) pairs that may
    #: close the string after ``tokens``; the last scored token is then their
    #: marginal, and the likeliest of them is committed with the content.
    closers: tuple[tuple[int, int], ...] = ()
    #: The closers that are committed with the copy when likeliest (None: any of them).
    #: Inside free text (:mod:`.word_copies`), punctuation and spaces only.
    committed_closers: frozenset[int] | None = None


@dataclass(frozen=True)
class ClosedChoice:
    """The candidates open at one state, each fitting the room and budget there.

    A *copy* choice (:mod:`.copy_choices`) is made only when the model ends the
    value after its best candidate, and its candidates may run past the block
    (the rest is owed to the next one).
    """

    candidates: tuple[Candidate, ...]
    #: True for a choice among spans of the request (:mod:`.copy_choices`).
    copy: bool = False
    #: True for a copy choice inside free text (:mod:`.word_copies`): its candidates are
    #: cut to those the model may be starting (``WORD_MIN_START``), possibly to none.
    within_text: bool = False
    #: True for a copy choice among numbers where a number opens (:mod:`.copy_choices`).
    number: bool = False
    #: True for a choice among object keys (``ConstraintSession.prefer_keys``): scored
    #: whole with its bonuses, and never calibrated against the choice prior.
    key: bool = False
    #: Added to each candidate's score, in the candidates' order (empty: nothing):
    #: the session's preferences (``ConstraintSession.prefer``).
    bonus: tuple[float, ...] = ()

    @property
    def width(self) -> int:
        """Tokens of the longest candidate."""
        return max(len(c.tokens) for c in self.candidates)


def choice_strings(
    forced: ForcedText,
    state: int,
    live: np.ndarray,
    *,
    max_choices: int = MAX_CHOICES,
    max_bytes: int = MAX_CHOICE_BYTES,
) -> list[tuple[bytes, int]] | None:
    """(content, state before the closing quote) for every string open at ``state``, or None.

    None when ``state`` does not open a closed choice (see the module docstring).
    """
    nxt_table = forced.byte_next
    if nxt_table is None:
        return None
    done: list[tuple[bytes, int]] = []
    stack: list[tuple[int, bytes, bool]] = [(state, b"", False)]
    while stack:
        cur, text, escaped = stack.pop()
        if forced.final[cur] or len(text) > max_bytes:
            return None  # the document may end here, or the string is too long: not a choice
        nxt = nxt_table[cur]
        for byte in np.flatnonzero((nxt >= 0) & live[np.maximum(nxt, 0)]).tolist():
            if byte == _QUOTE and not escaped:
                if not text:
                    return None  # a string opens here; we are not inside one
                done.append((text, cur))
            else:
                stack.append(
                    (int(nxt[byte]), text + bytes((byte,)), byte == _BACKSLASH and not escaped)
                )
            if len(done) + len(stack) > max_choices:
                return None
    return done or None


def candidates_at(
    forced: ForcedText,
    step: Callable[[int, int], int],
    state: int,
    live: np.ndarray,
    *,
    keys: bool = False,
) -> tuple[Candidate, ...] | None:
    """The tokenized candidates of the closed choice at ``state``, or None.

    ``step(state, token)`` is the token automaton's transition (-1 when refused).
    None also when a candidate's tokens do not end exactly where its content
    does (the content would merge with what follows it). With ``keys``, the
    choice among object keys at ``state`` instead (None where the strings are
    values): made whole only when the session is given bonuses for it
    (``ConstraintSession.prefer_keys``).
    """
    strings = choice_strings(forced, state, live)
    if strings is None:
        return None
    assert forced.byte_next is not None  # choice_strings returned strings
    contents = [content for content, _ in strings]
    out: list[Candidate] = []
    for content, before_quote in sorted(strings):
        quoted = int(forced.byte_next[before_quote, _QUOTE])
        after = b'"' + forced.forced_bytes(quoted, live)
        if (after[1:2] == b":") != keys:
            return None  # object keys are structure: the model decides them token by token
        tokenized = tokenize_in_context(forced, content, after)
        if tokenized is None:
            return None
        ids, cut = tokenized
        # A candidate that another one extends (``get_order``, ``get_orders``) also
        # commits the token that ends it, or the model could still extend it.
        extended = any(o != content and o.startswith(content) for o in contents)
        commit = ids[: cut + 1] if extended else ids[:cut]
        states = walk(step, state, commit)
        if states is None:
            return None
        text = content.decode("utf-8", "replace")
        out.append(Candidate(text, tuple(commit), tuple(ids[: cut + 1]), tuple(states)))
    return tuple(out)


def tokenize_in_context(
    forced: ForcedText, content: bytes, after: bytes
) -> tuple[list[int], int] | None:
    """The canonical tokens of ``content + after`` and how many of them spell
    ``content``; None when no token boundary falls where the content ends (it
    would merge with what follows) or nothing follows it."""
    ids = forced.tokenize(content + after)
    cut, size = 0, 0
    while cut < len(ids) and size < len(content):
        size += len(forced.token_bytes[ids[cut]])
        cut += 1
    if size != len(content) or cut == 0 or cut >= len(ids):
        return None
    return ids, cut


def walk(step: Callable[[int, int], int], state: int, tokens: Sequence[int]) -> list[int] | None:
    """The automaton state after each of ``tokens`` from ``state``; None when one is refused."""
    states: list[int] = []
    for tid in tokens:
        state = step(state, tid)
        if state < 0:
            return None
        states.append(state)
    return states


def fit(
    candidates: tuple[Candidate, ...], room: int, allowed_after: Callable[[int], np.ndarray]
) -> ClosedChoice | None:
    """The candidates that fit in ``room`` tokens with every state allowed
    (``allowed_after(k)``: the states allowed after the k-th token); None when
    some candidate does not fit the room (the choice cannot be made whole here)
    or none is allowed."""
    kept: list[Candidate] = []
    for cand in candidates:
        if len(cand.tokens) > room:
            return None
        if all(allowed_after(k)[s] for k, s in enumerate(cand.states)):
            kept.append(cand)
    return ClosedChoice(tuple(kept)) if kept else None
