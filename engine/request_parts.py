"""Each request of a message on its own: a message that asks for two things, decoded as two.

"Status of 2537? plus can you void ORD-91016?" holds two requests, and a small
model writing both calls in one action reads the whole message for each: the
second call's tool is chosen by words of the first request as much as its own,
and the tool-choice priors (:mod:`.tool_priors`) are worked out on the whole
message too. Over the two-request messages of three held-out sets the drafter
got both tools right in 71 of 136 when it decoded the message whole, and in 104
when it decoded each request on its own (docs/constraints.md, "Requests decoded
one by one").

A message splits into *parts* where a clause holding values
(:func:`~.call_coverage.clause_values`, or a member of an ``enum`` a required
parameter of the step's tools lists: "hana needs *editor* rights") follows another that holds some; clauses
without values ("and send a confirmation", "thanks a lot", "good morning.") stay
with the part before them, or the first part, and so does the joiner between
two parts ("and then", "plus"). :func:`split_request` gives the
parts of a message with two to :data:`MAX_PARTS` of them; the decoding paths
(``EmbeddedModel``, ``agentflow eval``) decode each part as a request of its own
(the conversation with the part in place of the message,
:func:`~.chat_template.with_request`), in one batch, and join the parts' calls
in order (:meth:`SplitRequest.joined`). Where a part is answered rather than
called, its calls take none of its values, or the joined calls break the
step's schema, the message is decoded whole, as without the split.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from .call_coverage import (
    DEPENDENT,
    action_calls,
    call_values,
    clause_values,
    clauses,
    request_values,
    takes,
    with_calls,
)
from .near_copies import is_near_copy
from .tool_relevance import QUOTED, enum_members, names_member, schema_nodes

#: A message of more parts than this is decoded whole: that many requests in one
#: message are rare, and each part is one more row of the batch.
MAX_PARTS = 4


@dataclass(frozen=True)
class SplitRequest:
    """The parts of one message, each to be decoded as a request of its own."""

    parts: tuple[str, ...]
    #: The step's tools' ``enum`` members (lower-cased) that count as values of a part.
    members: frozenset[str] = frozenset()

    def joined(self, texts: Sequence[str], schema: Mapping[str, Any] | None = None) -> str | None:
        """One action with the calls of every part's action ``texts`` (one per part, in
        order), a call written twice kept once; None when a part's action has no call
        (an answer, or no action), takes none of its part's values (its ``enum``
        members where it holds no other; :func:`takes`: a
        run-on ``"57}}]}count…"`` for "57 lines" is no call for it; a near copy of
        one counts, as the mending after decoding restores it), or the joined
        action breaks ``schema``."""
        if len(texts) != len(self.parts):
            raise ValueError(f"{len(self.parts)} parts, {len(texts)} actions")
        calls: list[dict[str, Any]] = []
        for part, text in zip(self.parts, texts, strict=True):
            found = action_calls(text)
            if not found:
                return None
            values = request_values(part) or _named(part, self.members)
            held = call_values(found)
            if values and not any(_takes_or_miscopies(held, v) for v in values):
                return None
            calls += [c for c in found if c not in calls]
        return with_calls('{"tool_calls":[]}', calls, schema)


def request_parts(request: str, members: Set[str] = frozenset()) -> list[str]:
    """``request`` cut where a clause with values follows a clause with values (see
    the module docstring); one part when it holds one request or none. A clause
    naming one of ``members`` (lower-cased ``enum`` members) outside quotes holds
    a value too."""
    cuts: list[int] = []
    position, seen_values = 0, False
    for clause in clauses(request):
        start = request.find(clause, position)
        position = start + len(clause)
        if not clause_values(clause) and (DEPENDENT.match(clause) or not _named(clause, members)):
            continue
        if seen_values:
            cuts.append(start)
        seen_values = True
    bounds = [0, *cuts, len(request)]
    return [request[a:b].strip() for a, b in pairwise(bounds)]


def split_request(request: str, schema: Mapping[str, Any] | None = None) -> SplitRequest | None:
    """The parts of ``request`` when it holds two to :data:`MAX_PARTS` requests and
    ``schema`` (the step's action schema) lets an action make that many calls; None
    otherwise (``parallel_tool_calls=False`` allows one call a step)."""
    members = frozenset(required_members(schema)) if schema is not None else frozenset()
    parts = request_parts(request, members)
    if not 2 <= len(parts) <= MAX_PARTS:
        return None
    if schema is not None and not _allows_calls(schema, len(parts)):
        return None
    return SplitRequest(tuple(parts), members)


def required_members(schema: Any) -> set[str]:
    """The ``enum`` members of the *required* parameters anywhere in ``schema`` (the
    step's action schema): a role a user needs, not a refund's optional reason
    ("since it came *late*" belongs to the refund's clause)."""
    found: set[str] = set()
    for node in schema_nodes(schema):
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            for name in node.get("required") or ():
                found |= enum_members(properties.get(name))
    return found


def _takes_or_miscopies(held: Sequence[str], value: str) -> bool:
    """True when an argument of ``held`` is ``value`` (:func:`takes`) or a near copy of
    it (:func:`~.near_copies.is_near_copy`: ``"ifmit@fastmail.fm"`` for
    ``chensmith@fastmail.fm``), which the mending after decoding puts right."""
    return takes(held, value) or any(is_near_copy(h, value) for h in held)


def _named(text: str, members: Set[str]) -> list[str]:
    """The ``members`` that ``text`` names as words of their own outside quotes."""
    bare = QUOTED.sub(" ", text).lower()
    return [m for m in sorted(members) if names_member(bare, m)]


def _allows_calls(schema: Mapping[str, Any], n: int) -> bool:
    """Whether an action of ``schema`` may hold ``n`` calls: read from the schema's
    ``tool_calls`` arrays (``maxItems``), wherever a ``oneOf``/``anyOf`` puts them."""
    limits = list(_call_limits(schema))
    return not limits or any(limit is None or limit >= n for limit in limits)


def _call_limits(schema: Any) -> list[int | None]:
    if not isinstance(schema, Mapping):
        return []
    found: list[int | None] = []
    calls = (schema.get("properties") or {}).get("tool_calls")
    if isinstance(calls, Mapping):
        limit = calls.get("maxItems")
        found.append(int(limit) if isinstance(limit, int) else None)
    for key in ("oneOf", "anyOf", "allOf"):
        for branch in schema.get(key) or []:
            found += _call_limits(branch)
    return found
