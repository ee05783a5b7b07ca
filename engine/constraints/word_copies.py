"""Copy choices inside free text: finishing a value the text has started to quote.

A final answer quotes the tool's result — "Order 58213 is shipped. The total was
129.99." — and a small model miscopies such values mid-sentence: ``129.9``,
``Sia Silva`` for Sofia Silva, ``cus_6300`` for cus_630. Where a string value
*opens*, :mod:`.copy_choices` offers the sources' spans whole; inside free text
nothing says where a value starts, so this module waits for the model to start
one: when the word in progress (the bytes since the last space, quote or
bracket, :func:`next_word`) is a strict prefix of a *value-like* span of the
sources (:func:`value_spans`: one with a digit, a capital or one of ``_-@./#:``
— ids, names, numbers, hosts, e-mails, paths), the spans it starts are offered
whole, their remaining bytes as the candidates (:func:`word_candidates`).

A within-text choice (``ClosedChoice.within_text``) is made only where the
model gives a candidate's first token at least ``WORD_MIN_START`` of its
likeliest token's probability (:func:`~.copy_choices.likeliest_starts`), and
when the model ends the word right after the best one (``WORD_MIN_CLOSE``, the
closers being the tokens that end a word, :func:`ends_word`). It is committed
with its likeliest closer when that is punctuation or a space (``cus_630,``:
the model may not go on with a digit); a closer that starts the next word is
left to the decoder.

The first word of a string is never finished: where a string opens, a value
is copied whole or not at all (:mod:`.copy_choices`), and finishing an
argument's first word from the sources took the request's punctuation with it
(``"machine":"cache-stg."`` from "... for cache-stg. thanks").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .closed_choices import Candidate, tokenize_in_context, walk
from .jump_forward import ForcedText

#: A candidate is kept when the model's probability of its first token is at least this
#: share of its likeliest token's: an unsure model (``ia`` 0.03 against ``ofia`` 0.004
#: after "S" of "Sofia") may be finishing the value, a sure one is writing its own word.
WORD_MIN_START = 0.1
#: The best candidate is taken when the model ends the word after it with at least this
#: probability (lower than a value opening's ``COPY_MIN_CLOSE``: inside text the model
#: has already started the value, and a longer id it would write is one it made up).
WORD_MIN_CLOSE = 0.1
#: A byte that starts a new word: what comes before it is not part of the value.
_BOUNDARY = frozenset(b" \t\r\n\"'([{<")
#: Bytes that make a span value-like besides digits and capitals.
_VALUE_MARKS = frozenset("_-@./#:")
#: Punctuation that ends a word when no letter or digit follows it in the token.
_TRAILING = frozenset(b".,;:!?)]}>'%")
_QUOTE = 0x22
_BACKSLASH = 0x5C


def value_spans(spans: Sequence[str]) -> tuple[str, ...]:
    """The spans worth finishing inside free text: those whose first word has a digit, a
    capital letter or one of ``_-@./#:`` (an id, a name, a number, a host). Plain
    lowercase words (``open``, ``on order #11501``) the model writes well on its own."""
    return tuple(
        s
        for s in spans
        if any(ch.isdigit() or ch.isupper() or ch in _VALUE_MARKS for ch in _first_word(s))
        and not any(ord(ch) < 0x20 or ch in '"\\' for ch in s)
    )


def _first_word(span: str) -> str:
    """The span's first word without the punctuation that ends a sentence (``morning.``)."""
    return span.split()[0].rstrip(".,;:!?")


def next_word(word: bytes | None, token: bytes, in_text: bool) -> bytes | None:
    """The word in progress after ``token``: the bytes since the last word boundary
    (space, opening bracket, ``'``). None when the state after the token is not free
    text (``in_text`` False: structure has no words to finish) and for a string's first
    word (after the ``"`` that opens it) until the next boundary."""
    if not in_text:
        return None
    cut = max((i for i, b in enumerate(token) if b in _BOUNDARY), default=-1)
    if cut >= 0:
        return None if token[cut] == _QUOTE else token[cut + 1 :]
    return None if word is None else word + token


def ends_word(data: bytes) -> bool:
    """True when a token of these bytes cannot continue the word before it: it starts
    with a space or a quote, or with punctuation that no letter or digit follows in it
    (``.``, ``).`` and ``%`` end ``129.99``; ``.5`` and ``_x`` go on)."""
    if not data:
        return False
    first = data[0]
    if first in b' \t\r\n"':
        return True
    if first not in _TRAILING:
        return False
    return len(data) == 1 or not chr(data[1]).isalnum()


def word_enders(forced: ForcedText) -> tuple[int, ...]:
    """The token ids that end a word (:func:`ends_word`)."""
    return tuple(t for t, data in enumerate(forced.token_bytes) if ends_word(data))


def word_candidates(
    forced: ForcedText,
    step: Callable[[int, int], int],
    state: int,
    live: np.ndarray,
    spans: Sequence[str],
    word: bytes,
    enders: Sequence[int],
) -> tuple[Candidate, ...]:
    """The rest of every span of ``spans`` whose first word ``word`` (the word in
    progress, not empty) strictly starts — a value already whole is not carried on
    into the words after it — tokenized canonically, accepted by the automaton from
    ``state``, each with the word-ending tokens that may follow it
    (:attr:`.Candidate.closers`). ``Candidate.text`` is the whole span."""
    if not word or forced.byte_next is None:
        return ()
    out: list[Candidate] = []
    seen: set[bytes] = set()
    for span in spans:
        whole = span.encode()
        if len(whole.split(maxsplit=1)[0]) <= len(word) or not whole.startswith(word):
            continue
        rest = whole[len(word) :]
        if rest in seen or _QUOTE in rest or _BACKSLASH in rest:
            continue
        seen.add(rest)
        tokenized = tokenize_in_context(forced, rest, b" ")
        if tokenized is None:
            continue
        ids, cut = tokenized
        content = tuple(ids[:cut])
        states = walk(step, state, content)
        if states is None or not all(bool(live[s]) for s in states):
            continue
        cur = states[-1]
        closers = tuple((t, q) for t in enders if (q := step(cur, t)) >= 0 and live[q])
        if not closers:
            continue
        bare = frozenset(t for t, _ in closers if not _has_word_bytes(forced.token_bytes[t]))
        out.append(
            Candidate(span, content, (*content, closers[0][0]), tuple(states), closers, bare)
        )
    return tuple(out)


def _has_word_bytes(data: bytes) -> bool:
    return any(chr(b).isalnum() or b >= 0x80 for b in data)
