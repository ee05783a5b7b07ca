"""Which parts of a request the calls of an action serve: the call still owed, the calls to drop.

A message often asks for two things ("send me invoice INV-2023-1670. downgrade
cus_457 to enterprise"), and a small model often stops after the first call:
over the held-out sets, two requests in five that needed two calls got one.
Whether the calls so far serve the whole request is easy to read from the
values, though. A request splits into clauses at sentence ends and at joiners
("and then", "plus", "also"...); each clause's values are its quoted text and
its value-like tokens (ids, hosts, e-mails, numbers: the arguments a call would
take). A clause is served when a call holds one of its values. When some clause
is served and another holds values that no call holds, the action has left part
of the request undone: :func:`follow_up` names the part left.

Pure text work, no model: the decoding paths (``EmbeddedModel``, ``agentflow
eval``) decode that part as a request of its own (the conversation with the part
in place of the request, :func:`~.chat_template.with_request`) and merge the calls
it gets after the action's own when they hold one of the values left
(:meth:`FollowUp.merged`). The same values show a list that went on too long:
a call after the first that takes no new value from the conversation is
dropped where the rest still serve the request (:func:`without_redundant_calls`).
docs/constraints.md ("Follow-up calls", "Redundant calls") has the measurements.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema.validators import validator_for

from .chat_template import ChatMessage, ToolSpec
from .tool_relevance import STOP_WORDS, is_value_like

#: Where a request splits into clauses: after a sentence's end, at a line break, and
#: at a joiner word. A bare "and" or "&" only splits where no value follows it: in
#: "restart worker-eu5 and cache-dev" it joins a list.
_SPLITS = re.compile(
    r"(?<=[.?!;])\s+|\n+"
    r"|,?\s+(?:-\s+)?(?:and then|and also|and after that|as well as|after that|plus|also|then)"
    r"[,:]?\s+"
    r"|,\s+and\s+"
    r"|\s+(?:and|&)\s+(?=(\S+))"
)
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”")
_TRIM = ".,;:!?()[]'\""
#: Words that are values without looking like ids: a name after a word for an
#: account ("turn off login joao"), search terms ("search: log retention", "look up
#: api rate limits in the knowledge base"), and a capitalised word inside the clause
#: ("how warm is it in Madrid").
_NAMED = re.compile(r"\b(?:user|login|account|customer)\s+([a-z][\w.-]{2,})", re.IGNORECASE)
_SEARCHED = re.compile(
    r"\b(?:search:|look up|search (?:the \w+ )?for)\s*(?:the\s+)?([^.?!,;]+?)(?=\s+(?:in|on) the\b|[.?!,;]|$)",
    re.IGNORECASE,
)
_CHATTER = re.compile(r"\s+(?:limit\b|-|thanks|please|asap|as soon|ok\b|it's)", re.IGNORECASE)
_PROPER = re.compile(r"(?<=\s)[A-Z][a-z]{2,}\b")
#: A clause that gives a reason for the one before it ("since it was delivered late"):
#: no request of its own whatever member it names (:mod:`.request_parts`), and no
#: place ("since it was broken *on arrival*").
DEPENDENT = re.compile(r"(?:since|because|as|due to|reason:)\b", re.IGNORECASE)
#: Thanks name no place either ("thanks for *waiting*").
_THANKS = re.compile(r"(?:thanks|thank|sorry)\b", re.IGNORECASE)
#: A plain word where a machine or a thing stands: after *on*, *from*, *at* or *for*
#: ("disk space on *cache*", "read postgres logs from *db*", "free space check for
#: *build*").
_PLACE = re.compile(r"\b(?:on|from|at|for)\s+([a-z][a-z0-9-]*)(?![\w@-])(?!\.\w)", re.IGNORECASE)
#: A question of at most three words whose first is capitalised: "Lisbon weather?".
_NAME_QUESTION = re.compile(r"^([A-Z][a-z]{2,})(?:\s+\S+){0,2}\?$")
_LETTERS = re.compile(r"[a-z]+")
_DIGIT = re.compile(r"\d")
_QUESTION_TEXT = """how what who whom whose where when why which any anything anyone
    can could would will should shall may might must did does have has are was were
    the this that these those there thanks"""
#: Words that lead a question without naming anything ("How are you?").
_QUESTION_WORDS = frozenset(_QUESTION_TEXT.split())
#: Words after an account word that are no name ("user cannot log in").
_NOT_NAMES = frozenset(
    [
        "now",
        "please",
        "the",
        "for",
        "and",
        "with",
        "from",
        "on",
        "is",
        "can",
        "to",
        "in",
        "cannot",
        "can't",
        "page",
        "thanks",
        "needs",
        "has",
        "was",
    ]
)


def clauses(request: str) -> list[str]:
    """``request`` split at sentence ends, line breaks and joiners (``and then``,
    ``plus``, ``also``...; ``and``/``&`` only when no value follows), empty parts left
    out."""
    out: list[str] = []
    start = 0
    for m in _SPLITS.finditer(request):
        follower = m.group(1)
        if follower is not None and is_value_like(follower):
            continue  # "a and b-2": a list of values, not two requests
        out.append(request[start : m.start()])
        start = m.end() if follower is None else m.start(1)
    out.append(request[start:])
    return [c.strip() for c in out if c.strip()]


def clause_values(clause: str) -> list[str]:
    """The values ``clause`` holds: its quoted texts, then its value-like tokens outside
    them (trimmed of sentence punctuation and a possessive ``'s``); a clause with
    neither gets its names, search terms and capitalised words instead
    (``_NAMED``, ``_SEARCHED``, ``_PROPER``): "turn off login joao" holds ``joao``,
    while "111 Oak Ave, Lyon" holds its numbers only, as "Oak" would be held by a
    call for another address; failing those, a plain word after *on*, *from*, *at*
    or *for* ("disk space on cache" holds ``cache``). A short question led by a capitalised word that is no question
    word holds that word ("Lisbon weather?, asap" holds ``Lisbon``; "How are
    you?" holds nothing)."""
    found = [a or b for a, b in _QUOTED.findall(clause)]
    bare = _QUOTED.sub(" ", clause)
    for token in bare.split():
        if not is_value_like(token):
            continue
        token = token.strip(_TRIM)
        if token.endswith("'s"):
            token = token[:-2]
        if token:
            found.append(token)
    if found:  # weaker values would mark it served by a call for another clause
        return found
    names = [n.strip(_TRIM) for n in _NAMED.findall(bare)]  # "login joao." names joao
    words = [n for n in names if n and n.lower() not in _NOT_NAMES]
    words += [_CHATTER.split(t)[0].strip() for t in _SEARCHED.findall(bare)]
    words += _PROPER.findall(bare)
    said = bare.strip()
    if not words and not DEPENDENT.match(said) and not _THANKS.match(said):  # a place, at last
        words += [w for w in _PLACE.findall(bare) if w.lower() not in STOP_WORDS | _NOT_NAMES]
    if not words:  # "Lisbon weather?": a short question led by a name
        asked = _CHATTER.split(said)[0].strip().rstrip(".,;")
        led = _NAME_QUESTION.match(asked)
        if led and led.group(1).lower() not in _QUESTION_WORDS:
            words.append(led.group(1))
    return [w for w in dict.fromkeys(words) if w]


def request_values(request: str) -> list[str]:
    """The values of every clause of ``request`` (:func:`clause_values`), in order."""
    return [v for clause in clauses(request) for v in clause_values(clause)]


def call_values(calls: Sequence[Mapping[str, Any]]) -> list[str]:
    """The strings and numbers the arguments of ``calls`` hold, lists and objects
    walked (booleans and nulls are no copied values)."""
    return [v for call in calls for v in _leaves(call.get("arguments", {}))]


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, str) or (
        isinstance(value, (int, float)) and not isinstance(value, bool)
    ):
        yield str(value)


def holds(held: Sequence[str], value: str) -> bool:
    """True when one of the ``held`` argument values is ``value`` or most of it, or
    holds it: ``325`` holds ``€325``, ``#86669`` holds ``86669``, a host list's item
    its host (case aside)."""
    v = value.lower()
    for h in held:
        h = h.lower()
        if v in h or (len(h) >= 3 and 2 * len(h) >= len(v) and h in v):
            return True
    return False


def takes(held: Sequence[str], value: str) -> bool:
    """True when one of the ``held`` argument values *is* ``value``, give or take a
    few characters (``#86669`` for ``86669``, ``325`` for ``€325``; case aside): each
    is at least half of the other. Stricter than :func:`holds`, which also accepts a
    long text that merely contains the value (a run-on ``57}}]}count…`` for ``57``)."""
    v = value.lower()
    for h in held:
        h = h.lower()
        if (v in h or h in v) and 2 * min(len(h), len(v)) >= max(len(h), len(v)):
            return True
    return False


@dataclass(frozen=True)
class FollowUp:
    """One more call owed after an action: the part of the request its calls leave
    untouched, to be decoded as a request of its own and merged in."""

    #: The action that owes the call (compact JSON with ``tool_calls``).
    action: str
    #: The request's clauses that hold values no call holds, joined by spaces.
    untouched: str
    #: Those values.
    values: tuple[str, ...]

    def fits(self, schema: Mapping[str, Any]) -> bool:
        """Whether ``schema`` lets :attr:`action` hold one more call (not where it allows
        one call a step, ``parallel_tool_calls=False``)."""
        calls = action_calls(self.action) or []
        return with_calls(self.action, [*calls, *calls[-1:]], schema) is not None

    def merged(self, text: str, schema: Mapping[str, Any] | None = None) -> str | None:
        """:attr:`action` with the new calls of ``text`` (the action decoded for
        :attr:`untouched` alone) after its own; None when ``text`` has no call that
        :attr:`action` lacks, its new calls take none of :attr:`values` (:func:`takes`:
        an argument that is the value, not one that runs on past it), or the merged
        action breaks ``schema`` (two calls where the schema allows one)."""
        first, more = action_calls(self.action), action_calls(text)
        if not first or not more:
            return None
        added = [c for c in more if c not in first]
        if not any(takes(call_values(added), v) for v in self.values):
            return None
        return with_calls(self.action, first + added, schema)


def action_calls(text: str) -> list[dict[str, Any]] | None:
    """The calls of an action JSON text (``{"tool_calls": [...]}``); None when it is not one."""
    try:
        action = json.loads(text)
    except ValueError:
        return None
    calls = action.get("tool_calls") if isinstance(action, dict) else None
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        return None
    return calls


def untouched(request: str, calls: Sequence[Mapping[str, Any]]) -> tuple[str, tuple[str, ...]]:
    """The clauses of ``request`` whose values ``calls`` leave untouched (joined), and
    those values; empty unless another clause is served (a call holds one of its
    values): a request the calls do not touch at all was misread, not half done."""
    held = call_values(calls)
    served, left = False, []
    for clause in clauses(request):
        values = clause_values(clause)
        if not values:
            continue
        if any(holds(held, v) for v in values):
            served = True
        else:
            left.append((clause, values))
    if not served or not left:
        return "", ()
    return " ".join(c for c, _ in left), tuple(v for _, vs in left for v in vs)


def follow_up(text: str, request: str) -> FollowUp | None:
    """The follow-up call an action ``text`` owes ``request`` (:func:`untouched`), or
    None: when it is no action with calls, or its calls touch every clause that holds
    values."""
    calls = action_calls(text)
    if not calls:
        return None
    part, values = untouched(request, calls)
    return FollowUp(text, part, values) if values else None


def without_redundant_calls(
    text: str,
    messages: Sequence[ChatMessage],
    instructions: str | None = None,
    schema: Mapping[str, Any] | None = None,
) -> str | None:
    """The action ``text`` without its redundant calls, or None when it has none to drop
    (or the conversation ``messages`` does not end with the request it answers).

    A call after the first is redundant when it takes no value from the
    conversation (``instructions`` and the messages' text) that the calls kept
    before it do not hold: it repeats their values, or holds only values of its
    own making. Redundant calls are dropped only when the calls left still serve
    every clause of the request that holds values (:func:`untouched` finds none
    left) and the action left fits ``schema``."""
    calls = action_calls(text)
    if not calls or len(calls) < 2 or not messages or messages[-1].role != "user":
        return None
    said = conversation_text(messages, instructions).lower()
    kept, held = [calls[0]], set(_said(call_values(calls[:1]), said))
    for call in calls[1:]:
        values = call_values([call])
        new = [v for v in _said(values, said) if v not in held]
        if values and not new:
            continue
        kept.append(call)
        held.update(new)
    if len(kept) == len(calls) or untouched(messages[-1].content, kept)[1]:
        return None
    return with_calls(text, kept, schema)


def with_arguments(
    calls: Sequence[Mapping[str, Any]],
    tools: Sequence[ToolSpec],
    mend: Callable[[str, str, Mapping[str, Any], dict[str, Any]], str | None],
) -> list[dict[str, Any]]:
    """``calls`` with each top-level string argument replaced by what
    ``mend(name, written, properties, arguments)`` returns for it (None: kept),
    where ``properties`` are its tool's parameter schemas (from ``tools``; an
    argument its tool does not describe is kept) and ``arguments`` the call's
    arguments as mended so far."""
    specs = {tool.name: tool.parameters.get("properties") or {} for tool in tools}
    mended: list[dict[str, Any]] = []
    for call in calls:
        arguments = call.get("arguments")
        properties = specs.get(call.get("name"), {})
        if not isinstance(arguments, Mapping):
            mended.append(dict(call))
            continue
        new = dict(arguments)
        for name, written in arguments.items():
            if isinstance(written, str) and isinstance(properties.get(name), Mapping):
                found = mend(name, written, properties, new)
                if found is not None:
                    new[name] = found
        mended.append({**call, "arguments": new})
    return mended


def conversation_text(messages: Sequence[ChatMessage], instructions: str | None = None) -> str:
    """The text a value may come from: ``instructions`` and every message's content."""
    return "\n".join([instructions or "", *(m.content for m in messages)])


def with_calls(
    action: str, calls: list[dict[str, Any]], schema: Mapping[str, Any] | None
) -> str | None:
    """``action`` with ``calls`` for its own, as compact JSON; None when it breaks ``schema``."""
    whole = json.loads(action)
    whole["tool_calls"] = calls
    if schema and not validator_for(schema)(schema).is_valid(whole):
        return None
    return json.dumps(whole, ensure_ascii=False, separators=(",", ":"))


def as_said(value: str | int | float) -> str:
    """A string or number as a request would say it (``22.0`` as ``22``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def says(said: str, value: str) -> bool:
    """The lower-cased text ``said`` holds ``value`` (case aside) as a whole word, not
    inside a longer one: "turn off login omoreau" says ``omoreau``, not ``omore``;
    "SO-14246" says ``14246`` (a hyphen, a ``#`` or a space bounds a word), "$343.94"
    says no ``343``."""
    pattern = rf"(?<!\w)(?<!\d[.,]){re.escape(value.lower())}(?!\w)(?![.,]\d)"
    return re.search(pattern, said) is not None


def _said(values: Sequence[str], said: str) -> list[str]:
    """The ``values`` (lower-cased) that the lower-cased text ``said`` holds as whole
    words (:func:`says`: "re" is no value of "green again"), but for
    those made of stop words alone ("urgent" from "it's kind of urgent", "please"):
    chatter, not a value a call could take from the conversation."""
    return [
        v.lower()
        for v in values
        if (len(v) >= 2 or v.isdigit()) and says(said, v) and not _chatter_only(v)
    ]


def _chatter_only(value: str) -> bool:
    found = _LETTERS.findall(value.lower())
    return bool(found) and all(w in STOP_WORDS for w in found) and not _DIGIT.search(value)
