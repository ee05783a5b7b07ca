"""Fit a translated ``pattern`` into ``minLength``/``maxLength`` by narrowing its repeats.

A pattern such as ``^[a-z0-9-]+:[a-z0-9-]+$`` with ``maxLength: 146`` has no exact
regex of modest size, but a *subset* does: cap each unbounded repeat so that the
longest match fits (``{1,71}`` each here), and raise a repeat's minimum until the
shortest match is long enough. Every string of the narrowed regex matches the
pattern and has an allowed length, so enforcing it stays sound; some valid
strings are not generated.
"""

from __future__ import annotations

from typing import Any

#: Nodes are ``ecma_pattern._Node`` (kind, ranges, children, lo, hi); typed loosely to
#: keep this module free of an import cycle.
Node = Any


def length_range(node: Node) -> tuple[int, int | None]:
    """Shortest and longest (None: unbounded) match of ``node``, in code points."""
    if node.kind == "chars":
        return 1, 1
    if node.kind in ("seq", "alt"):
        ranges = [length_range(c) for c in node.children]
        if node.kind == "seq":
            lo = sum(a for a, _ in ranges)
            highs = [b for _, b in ranges]
            return lo, None if any(b is None for b in highs) else sum(highs)  # type: ignore[arg-type]
        if not ranges:
            return 0, 0
        highs = [b for _, b in ranges]
        return min(a for a, _ in ranges), (
            None if any(b is None for b in highs) else max(highs)  # type: ignore[type-var]
        )
    if node.kind == "repeat":
        a, b = length_range(node.children[0])
        return a * node.lo, None if node.hi is None or b is None else b * node.hi
    return 0, 0


def _copy(node: Node, **changes: Any) -> Node:
    kw = {"kind": node.kind, "ranges": node.ranges, "children": node.children}
    kw.update({"lo": node.lo, "hi": node.hi})
    kw.update(changes)
    return type(node)(**kw)


def cap(node: Node, limit: int) -> Node | None:
    """A sub-language of ``node`` whose matches are at most ``limit`` long (None: empty)."""
    lo, hi = length_range(node)
    if lo > limit:
        return None
    if hi is not None and hi <= limit:
        return node
    if node.kind == "alt":
        kept = [c for c in (cap(c, limit) for c in node.children) if c is not None]
        return _copy(node, children=kept) if kept else None
    if node.kind == "seq":
        return _cap_seq(node, limit)
    if node.kind == "repeat":
        child = cap(node.children[0], limit // max(node.lo, 1))
        if child is None:
            return _copy(node, hi=0) if node.lo == 0 else None
        _, b = length_range(child)
        assert b is not None
        if b == 0:
            return _copy(node, children=[child])
        count = min(node.hi if node.hi is not None else limit, limit // b)
        if count < node.lo:
            return None
        return _copy(node, children=[child], hi=count)
    return None


def _cap_seq(node: Node, limit: int) -> Node | None:
    ranges = [length_range(c) for c in node.children]
    slack = limit - sum(a for a, _ in ranges)
    growable = [i for i, (a, b) in enumerate(ranges) if b is None or b > a]
    out = list(node.children)
    for k, i in enumerate(growable):
        share = slack // len(growable) + (1 if k < slack % len(growable) else 0)
        capped = cap(out[i], ranges[i][0] + share)
        if capped is None:
            return None
        out[i] = capped
    return _copy(node, children=out)


def raise_minimum(items: list[Node], need: int, order: list[int]) -> list[Node] | None:
    """Raise the minimum count of top-level repeats (in ``order``) of a fixed-length body
    until the sequence's shortest match grows by ``need``; None when it cannot."""
    out = list(items)
    for i in order:
        if need <= 0:
            break
        node = out[i]
        if node.kind != "repeat":
            continue
        a, b = length_range(node.children[0])
        if a != b or a == 0:
            continue
        extra = -(-need // a)
        if node.hi is not None:
            extra = min(extra, node.hi - node.lo)
        if extra <= 0:
            continue
        out[i] = _copy(node, lo=node.lo + extra)
        need -= extra * a
    return out if need <= 0 else None


def fit(
    items: list[Node], body: set[int], min_len: int, max_len: int | None, seq: Node
) -> Node | None:
    """The sequence ``items`` narrowed to lengths in [min_len, max_len]; None when impossible.

    ``body`` holds the indices of the pattern's own items (preferred when raising
    minimums over the padding of an unanchored pattern); ``seq`` is a template node.
    """
    node = _copy(seq, kind="seq", children=list(items))
    lo, hi = length_range(node)
    if lo < min_len:
        order = [i for i in range(len(items)) if i in body] + [
            i for i in range(len(items)) if i not in body
        ]
        raised = raise_minimum(list(items), min_len - lo, order)
        if raised is None:
            return None
        node = _copy(node, children=raised)
    if max_len is not None:
        node = cap(node, max_len)
    if node is None:
        return None
    lo, hi = length_range(node)
    if lo < min_len or (max_len is not None and (hi is None or hi > max_len)):
        return None
    return node
