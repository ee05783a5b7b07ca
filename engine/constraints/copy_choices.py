"""Copy choices: the request's own words as whole candidates where a string value opens.

Most argument values an agent writes are copied from the conversation: an order
id, an e-mail, a hostname, a quoted title. A small model that writes such a
value token by token miscopies it — drops a digit, ends it early, swaps a
letter — even when the value is right there in the request. Where a JSON
string value opens, a constraint session given the texts a value may be copied
from (:meth:`~.enforcement.ConstraintSession.copy_from`) offers their spans as a
closed choice (:mod:`.closed_choices`): every run of up to ``MAX_SPAN_WORDS``
words, trimmed of the punctuation around it (a double-quoted phrase whole),
that the automaton accepts there as the whole value. The decoder keeps the
candidates the model is likeliest to start with (``MAX_COPY_STARTS``), scores
them whole — each with the marginal probability that the string closes right
after it — and commits the best with its likeliest closing token, but only
when that closing probability is at least :data:`COPY_MIN_CLOSE`: a value the
model would not end there (a final answer that goes on, a value it writes
otherwise) stays free.

Numbers are copied the same way where a JSON number opens (:func:`opens_number`:
after ``:``, ``[`` or ``,`` at a state that takes a digit): the sources' numbers
(:func:`number_spans`) are the candidates, and the tokens that may end a number
there (``,``, ``}``, ``]}``...) close them. A port written ``808`` for the
request's 8080, or ``222`` replicas for 22, is the miscopy this prevents.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from .closed_choices import Candidate, ClosedChoice, tokenize_in_context, walk
from .jump_forward import ForcedText
from .word_copies import WORD_MIN_START

if TYPE_CHECKING:
    from torch import Tensor

#: Longest span offered, in words.
MAX_SPAN_WORDS = 6
#: Longest span offered, in bytes.
MAX_SPAN_BYTES = 64
#: The best candidate is taken when the model closes the string after it with
#: at least this probability (else the value is not done there).
COPY_MIN_CLOSE = 0.5
#: The same for a number (:func:`opens_number`): lower, because a model that has read
#: a number poorly judges where it ends (the drafter ends the request's ``8080`` at
#: ``808`` with 0.88 and gives ``8080`` 0.14); the first-digit gate of
#: :func:`likeliest_starts` keeps numbers it is not writing out.
NUMBER_MIN_CLOSE = 0.1
#: Candidates scored whole: those starting with one of the model's likeliest
#: first tokens among them, at most this many distinct ones ...
MAX_COPY_STARTS = 4
#: ... and at most this many candidates in all.
MAX_COPY_CANDIDATES = 24

_WORD = re.compile(r"\S+")
#: A JSON number as written in text (no exponent: requests do not write one).
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
#: Bytes that go on with a number: a token starting with one does not end it.
_NUMBER_BYTES = frozenset(b"0123456789.eE+-")
#: The last byte of a token after which a value may open (an object member's ``:``,
#: an array's ``[`` or ``,``; a space after them).
_VALUE_OPENERS = frozenset(b":[, \t\n")
_QUOTED = re.compile(r'"([^"\n]+)"')
_POSSESSIVE = re.compile(r"['\u2019]s$")
#: Stripped from a span's ends: sentence punctuation, brackets and quotes.
_EDGE = "\"'`.,;:!?()[]{}<>"
#: Words of politeness and urgency, no value of any tool: a span of them alone is not
#: offered ("as soon as possible" copied as a service's name).
CHATTER_WORDS = frozenset(
    [
        "as",
        "soon",
        "possible",
        "asap",
        "please",
        "pls",
        "plz",
        "thanks",
        "thank",
        "you",
        "a",
        "lot",
        "so",
        "ok",
        "okay",
        "quick",
        "one",
        "hey",
        "yo",
        "hi",
        "hello",
        "good",
        "morning",
        "greetings",
        "kind",
        "of",
        "it's",
    ]
)
#: Stripped from a word's ends before it is read as a number: ``$129.99``, ``20%``, ``#4512``.
_NUMBER_EDGE = _EDGE + "$€£#%"
_QUOTE = 0x22
_BACKSLASH = 0x5C


def source_texts(text: str) -> list[str]:
    """The texts a source offers spans of: a JSON object or array (a tool result) its
    scalar values — strings as they are, numbers as written (``129.99``, not
    ``129.989999``) — and any other text itself."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return [text]
    try:
        data = json.loads(stripped, parse_float=str, parse_int=str)
    except ValueError:
        return [text]
    values: list[str] = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, str) and item:
            values.append(item)
    return values


def request_spans(texts: Sequence[str], max_words: int = MAX_SPAN_WORDS) -> tuple[str, ...]:
    """Every run of 1..``max_words`` words of ``texts`` (of a JSON text, of each of its
    values: :func:`source_texts`), trimmed of edge punctuation, without duplicates, in
    order of first appearance. A double-quoted phrase is one value: a span holds all
    of it or none of it. A word with a possessive ``'s`` is offered without it too.
    Spans of chatter alone ("as soon as possible", "thanks") are left out."""
    seen: dict[str, None] = {}
    for text in (value for source in texts for value in source_texts(source)):
        quoted = [(m.start(1), m.end(1)) for m in _QUOTED.finditer(text)]
        words = list(_WORD.finditer(text))
        for i in range(len(words)):
            for j in range(i, min(i + max_words, len(words))):
                raw = text[words[i].start() : words[j].end()]
                span = raw.strip(_EDGE)
                if (
                    not any(ch.isalnum() for ch in span)
                    or '"' in span
                    or len(span.encode()) > MAX_SPAN_BYTES
                    or all(w.strip(_EDGE).lower() in CHATTER_WORDS for w in span.split())
                ):
                    continue
                lo = words[i].start() + (len(raw) - len(raw.lstrip(_EDGE)))
                hi = lo + len(span)
                if any(lo < b and a < hi and not (lo <= a and b <= hi) for a, b in quoted):
                    continue  # cuts a quoted phrase
                seen.setdefault(span, None)
                stem = _POSSESSIVE.sub("", span)  # "redis's journal": the name is "redis"
                if stem != span and i == j:
                    seen.setdefault(stem, None)
    return tuple(seen)


def number_spans(texts: Sequence[str]) -> tuple[str, ...]:
    """The numbers written in ``texts`` (of a JSON text, its scalar values: :func:`source_texts`),
    each a whole word once ``$``, ``%``, ``#`` and sentence punctuation are trimmed, in
    order of first appearance: ``8080`` in "port 8080", ``129.99`` in "$129.99.", not
    ``14246`` in "SO-14246" (an id's digits are not a number)."""
    seen: dict[str, None] = {}
    for text in (value for source in texts for value in source_texts(source)):
        for word in _WORD.findall(text):
            number = word.strip(_NUMBER_EDGE)
            if _NUMBER.fullmatch(number) and len(number) <= MAX_SPAN_BYTES:
                seen.setdefault(number, None)
    return tuple(seen)


def opens_number(
    forced: ForcedText, free_text: Callable[[int], bool], state: int, last: int
) -> bool:
    """True when a JSON number may open at ``state``, which token ``last`` led to: the
    token ends with ``:``, ``[``, ``,`` or a space, ``state`` is not inside free text
    and takes a digit."""
    data = forced.token_bytes[last] if 0 <= last < len(forced.token_bytes) else b""
    nxt = forced.byte_next
    if nxt is None or not data or data[-1] not in _VALUE_OPENERS or free_text(state):
        return False
    return bool((nxt[state, 0x30:0x3A] >= 0).any())


def opens_string(
    forced: ForcedText, free_text: Callable[[int], bool], before: int, token: int
) -> bool:
    """True when ``token``, read from state ``before``, ends with the quote that opens a
    string (its last byte is ``"`` and the state before that byte is not inside free text)."""
    data = forced.token_bytes[token] if 0 <= token < len(forced.token_bytes) else b""
    nxt = forced.byte_next
    if nxt is None or not data or data[-1] != _QUOTE:
        return False
    cur = before
    for byte in data[:-1]:
        cur = int(nxt[cur, byte])
        if cur < 0:
            return False
    if len(data) >= 2 and data[-2] == _BACKSLASH:
        return False
    return not free_text(cur)


def copy_candidates(
    forced: ForcedText,
    step: Callable[[int, int], int],
    state: int,
    live: np.ndarray,
    spans: Sequence[str],
    *,
    number: bool = False,
) -> tuple[Candidate, ...]:
    """The spans the automaton accepts at ``state`` as a whole string value, tokenized
    canonically in context (the content, its closing ``"`` and what that forces),
    each with the tokens that may close it (:attr:`.Candidate.closers`). With
    ``number``, the spans are numbers (:func:`number_spans`) and ``state`` is where a
    number opens: the closers are the tokens that end it there.

    A span is dropped when it needs escaping, when its tokens would not end where
    it does, or when the string is an object key (``"`` forces ``:``). What each
    (state, span) gives is kept in :attr:`.ForcedText.copies` for later sessions.
    """
    if forced.byte_next is None:
        return ()
    out: list[Candidate] = []
    for span in spans:
        key = (state, span)
        found = forced.copies.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = (_number_candidate if number else _span_candidate)(
                forced, step, state, live, span
            )
            forced.remember_copy(key, found)
        if found is _OBJECT_KEY:
            return ()  # an object key: structure, never copied
        if found is not None:
            out.append(found)
    return tuple(out)


#: :func:`_span_candidate` results that are not a candidate.
_UNSEEN = object()
_OBJECT_KEY = object()


def _span_candidate(
    forced: ForcedText, step: Callable[[int, int], int], state: int, live: np.ndarray, span: str
) -> Candidate | object | None:
    """``span`` as a copy candidate at ``state``; None when the automaton or the
    tokenization refuses it, :data:`_OBJECT_KEY` when the string there is a key."""
    content = span.encode()
    if _QUOTE in content or _BACKSLASH in content or any(b < 0x20 for b in content):
        return None
    cur = _walk_bytes(forced, live, state, content)
    if cur < 0:
        return None
    assert forced.byte_next is not None  # _walk_bytes read it
    quoted = int(forced.byte_next[cur, _QUOTE])
    if quoted < 0 or not live[quoted]:
        return None
    after = b'"' + forced.forced_bytes(quoted, live)
    if after[1:2] == b":":
        return _OBJECT_KEY

    # Any token that starts with the closing quote may end the value (``"``, ``",``,
    # ``"}}]}``...): the model's likeliest is committed with the span, which keeps
    # the junction on the tokenizer's own segmentation.
    def closing(end: int) -> tuple[tuple[int, int], ...]:
        return tuple((t, q) for t in forced.quote_tokens if (q := step(end, t)) >= 0 and live[q])

    return _tokenized(forced, step, state, span, after, closing)


def _number_candidate(
    forced: ForcedText, step: Callable[[int, int], int], state: int, live: np.ndarray, span: str
) -> Candidate | None:
    """The number ``span`` as a copy candidate where a number opens at ``state``; None
    when the automaton refuses it there (a type, range or length it breaks) or nothing
    may end it."""
    if _walk_bytes(forced, live, state, span.encode()) < 0:
        return None

    def ending(end: int) -> tuple[tuple[int, int], ...]:  # the tokens that end the number
        lo, hi = int(forced.offsets[end]), int(forced.offsets[end + 1])
        pairs = zip(forced.tokens[lo:hi], forced.next_states[lo:hi], strict=True)
        return tuple(
            (int(t), int(q))
            for t, q in pairs
            if forced.token_bytes[t][:1]
            and forced.token_bytes[t][0] not in _NUMBER_BYTES
            and live[q]
        )

    return _tokenized(forced, step, state, span, b",", ending)


def _walk_bytes(forced: ForcedText, live: np.ndarray, state: int, content: bytes) -> int:
    """The state after ``content`` read byte by byte from ``state``; -1 when refused or dead."""
    nxt = forced.byte_next
    assert nxt is not None
    cur = state
    for byte in content:
        cur = int(nxt[cur, byte])
        if cur < 0 or not live[cur]:
            return -1
    return cur


def _tokenized(
    forced: ForcedText,
    step: Callable[[int, int], int],
    state: int,
    span: str,
    after: bytes,
    closers_at: Callable[[int], tuple[tuple[int, int], ...]],
) -> Candidate | None:
    """``span`` tokenized canonically before ``after``, walked from ``state``, with the
    tokens that may close it where it ends (``closers_at``, kept per state in
    :attr:`.ForcedText.closers`: a string's end states and a number's are apart);
    None when the tokens do not end where the span does or nothing may close it."""
    tokenized = tokenize_in_context(forced, span.encode(), after)
    if tokenized is None:
        return None
    ids, cut = tokenized
    content_ids = tuple(ids[:cut])
    states = walk(step, state, content_ids)
    if states is None:
        return None
    end = states[-1]
    closers = forced.closers.get(end)
    if closers is None:  # most spans end in the same state (inside a free string)
        closers = forced.closers[end] = closers_at(end)
    if not closers:
        return None
    return Candidate(span, content_ids, (*content_ids, closers[0][0]), tuple(states), closers)


def likeliest_starts(choice: ClosedChoice, first: Tensor) -> ClosedChoice:
    """A copy choice cut to the candidates that start with one of the ``MAX_COPY_STARTS``
    first tokens the model likes best (log-probabilities ``first``) among theirs, the
    likeliest start's first, at most ``MAX_COPY_CANDIDATES``. A choice inside free text
    (``within_text``) or among numbers keeps those whose first token has at least
    ``WORD_MIN_START`` of the probability of the model's likeliest token of all, and may
    be left with none: the model is not writing one of them (a refund's amount is not
    the order number the request holds)."""
    if choice.within_text or choice.number:
        floor = float(first.max()) + math.log(WORD_MIN_START)
        kept = [c for c in choice.candidates if float(first[c.tokens[0]]) >= floor]
        kept.sort(key=lambda c: -float(first[c.tokens[0]]))
        return replace(choice, candidates=tuple(kept[:MAX_COPY_CANDIDATES]))
    starts = sorted({c.tokens[0] for c in choice.candidates}, key=lambda t: -float(first[t]))
    rank = {t: i for i, t in enumerate(starts[:MAX_COPY_STARTS])}
    kept = sorted(
        (c for c in choice.candidates if c.tokens[0] in rank), key=lambda c: rank[c.tokens[0]]
    )
    return replace(choice, candidates=tuple(kept[:MAX_COPY_CANDIDATES]))
