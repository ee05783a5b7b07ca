"""Which parts of a request the calls of an action serve, and whether one more call is owed.

A message often asks for two things ("send me invoice INV-2023-1670. downgrade
cus_457 to enterprise"), and a small model often stops after the first call:
over the held-out sets, two requests in five that needed two calls got one.
Whether the calls so far serve the whole request is easy to read from the
values, though. A request splits into clauses at sentence ends and at joiners
("and then", "plus", "also"...); each clause's values are its quoted text and
its value-like tokens (ids, hosts, e-mails, numbers: the arguments a call would
take). A clause is served when a call holds one of its values. When some clause
is served and another holds values that no call holds, the action has left part
of the request undone: :func:`follow_up` says where to go on with one more call,
and which words that call should serve (its tool-name bonuses are worked out
from them, :mod:`.tool_priors`).

Pure text work, no model: the decoding paths (``EmbeddedModel``, ``agentflow
eval``) decode the follow-up from :attr:`FollowUp.prefix` and keep it only when
the new calls hold one of the values left (:meth:`FollowUp.serves`).
docs/constraints.md ("Follow-up calls") has the measurements.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .tool_relevance import is_value_like

if TYPE_CHECKING:
    from .constraints.protocol import DecodeConstraint
    from .tokenizer import Tokenizer

#: Where a request splits into clauses: after a sentence's end, at a line break, and
#: at a joiner word. A bare "and" or "&" only splits where no value follows it: in
#: "restart worker-eu5 and cache-dev" it joins a list.
_SPLITS = re.compile(
    r"(?<=[.?!;])\s+|\n+"
    r"|,?\s+(?:and then|and also|and after that|as well as|after that|plus|also|then)\s+"
    r"|,\s+and\s+"
    r"|\s+(?:and|&)\s+(?=(\S+))"
)
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”")
_TRIM = ".,;:!?()[]'\""
#: The JSON text that starts one more call after a call of a compact action.
NEXT_CALL = ',{"name":"'
#: A follow-up is decoded only when the budget leaves room for a call this long.
MIN_FOLLOW_UP_TOKENS = 12


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
    them, trimmed of sentence punctuation and a possessive ``'s``."""
    found = [a or b for a, b in _QUOTED.findall(clause)]
    for token in _QUOTED.sub(" ", clause).split():
        if not is_value_like(token):
            continue
        token = token.strip(_TRIM)
        if token.endswith("'s"):
            token = token[:-2]
        if token:
            found.append(token)
    return found


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


@dataclass(frozen=True)
class FollowUp:
    """One more call owed after an action's calls: where to decode it from and what for."""

    #: The action text up to the start of the next call's name (``…},{"name":"``).
    prefix: str
    #: The request's clauses that hold values no call holds, joined by spaces.
    untouched: str
    #: Those values.
    values: tuple[str, ...]

    def serves(self, text: str) -> bool:
        """True when the action ``text`` continues :attr:`prefix` with calls that hold one
        of :attr:`values` (the follow-up did what it was decoded for)."""
        calls = action_calls(text)
        if calls is None or not text.startswith(self.prefix[: -len(NEXT_CALL)]):
            return False
        before = action_calls(self.prefix[: -len(NEXT_CALL)] + "]}") or []
        added = call_values(calls[len(before) :])
        return any(holds(added, v) for v in self.values)


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
    """The follow-up call an action ``text`` owes ``request`` (:func:`untouched`), or None:
    when it is no compact action with calls, or its calls touch every clause that
    holds values."""
    calls = action_calls(text)
    if not calls:
        return None
    part, values = untouched(request, calls)
    if not values:
        return None
    end = text.rstrip().rfind("]")
    if end <= 0 or text[:end].rstrip()[-1:] != "}":
        return None
    return FollowUp(text[:end].rstrip() + NEXT_CALL, part, values)


@dataclass
class FollowUpRow:
    """A row of a decoded batch that owes a follow-up call, ready to decode again."""

    #: The row's index in the batch.
    row: int
    follow: FollowUp
    #: The prompt's tokens, then the prefix's.
    prompt: list[int]
    #: The choice prior's tokens, then the prefix's (None: no prior).
    prior: list[int] | None
    #: A fresh constraint session for the row, advanced over the prefix.
    session: DecodeConstraint
    #: Tokens of the prefix (they count against the row's budget).
    prefix_tokens: int

    def action(self, continuation: str) -> str | None:
        """The whole action once ``continuation`` (the text decoded after the prefix)
        follows the prefix, or None when its calls do not serve the untouched part."""
        text = self.follow.prefix + continuation
        return text if self.follow.serves(text) else None


def follow_up_rows(
    texts: Sequence[str],
    requests: Sequence[str],
    prompts: Sequence[str],
    priors: Sequence[str | None],
    tokenizer: Tokenizer,
    new_session: Callable[[int, FollowUp], DecodeConstraint],
    budget: int,
) -> list[FollowUpRow]:
    """The rows of a decoded batch (``texts``, decoded from ``prompts`` for ``requests``)
    that owe a follow-up call (:func:`follow_up`), each with a session from
    ``new_session(row, follow_up)`` advanced over the prefix. A row whose prefix
    leaves fewer than a few tokens of its ``budget``, or that the constraint refuses
    (a prefix the schema does not allow), is left as it is."""
    from .errors import InfeasibleConstraintError

    out: list[FollowUpRow] = []
    for i, (text, request) in enumerate(zip(texts, requests, strict=True)):
        follow = follow_up(text, request)
        if follow is None:
            continue
        prefix = tokenizer.encode(follow.prefix)
        if budget - len(prefix) < MIN_FOLLOW_UP_TOKENS:
            continue
        session = new_session(i, follow)
        try:
            session.advance(prefix)
        except InfeasibleConstraintError:
            continue
        prior = priors[i]
        out.append(
            FollowUpRow(
                i,
                follow,
                tokenizer.encode(prompts[i]) + prefix,
                None if prior is None else tokenizer.encode(prior) + prefix,
                session,
                len(prefix),
            )
        )
    return out
