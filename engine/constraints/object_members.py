"""Regexes for an object's members in declaration order, linear in size.

Members appear in the order the schema declares them; required ones always,
optional ones maybe. Writing "which optional member comes first" naively repeats
every later member once per candidate first member (quadratic size). Here the
non-empty subsequences of optional members are built by halving, so each
member's regex is copied O(log n) times and the regex nests O(log n) deep
(Rust ``regex-syntax`` refuses nesting deeper than 250).
"""

from __future__ import annotations

from .regex_text import alt, optional, seq

#: Below this many optional members, a left-nested chain (two copies of each) is used.
_CHAIN_MAX = 4


def ordered_members(entries: list[tuple[str, bool]], comma: str) -> str | None:
    """A non-empty comma-separated sequence of ``entries`` (regex, required) in order.

    Every required entry is present, each optional one at most once; None when no
    non-empty sequence exists (no entries).
    """
    first_required = next((i for i, (_, req) in enumerate(entries) if req), None)
    if first_required is None:
        return _non_empty([e for e, _ in entries], comma)
    head = _non_empty([e for e, _ in entries[:first_required]], comma)
    tail_parts = [entries[first_required][0]]
    for regex, req in entries[first_required + 1 :]:
        member = seq(comma, regex)
        tail_parts.append(member if req else optional(member))
    tail = seq(*tail_parts)
    if head is None:
        return tail
    return seq(optional(seq(head, comma)), tail)


def _rest(regexes: list[str], comma: str) -> str:
    """Any subsequence (possibly empty) of ``regexes``, each preceded by a comma."""
    return "".join(optional(seq(comma, r)) for r in regexes)


def _non_empty(regexes: list[str], comma: str) -> str | None:
    """Any non-empty in-order subsequence of ``regexes``, comma-separated."""
    if not regexes:
        return None
    if len(regexes) <= _CHAIN_MAX:
        out = regexes[0]
        for r in regexes[1:]:
            out = alt([seq(out, optional(seq(comma, r))), r]) or ""
        return out
    mid = len(regexes) // 2
    left, right = regexes[:mid], regexes[mid:]
    # Something from the left half (then any of the right), or only the right half.
    return alt([seq(_non_empty(left, comma), _rest(right, comma)), _non_empty(right, comma)])
