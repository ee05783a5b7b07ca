"""Building blocks for regexes that both Python ``re`` and Rust ``regex`` accept.

Every character that is not an ASCII letter or digit is written as a hex escape
(``\\xHH``, ``\\uHHHH``, ``\\UHHHHHHHH``), so no character can take a meta meaning
in either engine (Rust's class set operators ``&&``/``--``/``~~`` included).
Only non-capturing groups are emitted. ``None`` stands for the empty language.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

Ranges = list[tuple[int, int]]

MAX_CODE_POINT = 0x10FFFF
_ESCAPE_ATOM = re.compile(r"\\x[0-9a-f]{2}|\\u[0-9a-f]{4}|\\U[0-9a-f]{8}")
SURROGATES = (0xD800, 0xDFFF)


def escape_char(cp: int) -> str:
    """One code point as a regex atom valid in both engines."""
    if (0x30 <= cp <= 0x39) or (0x41 <= cp <= 0x5A) or (0x61 <= cp <= 0x7A):
        return chr(cp)
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def literal(text: str) -> str:
    """A regex matching exactly ``text``."""
    return "".join(escape_char(ord(c)) for c in text)


def normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sorted, merged, surrogate-free code-point ranges."""
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if hi < lo:
            continue
        for a, b in _split_surrogates(lo, hi):
            if out and a <= out[-1][1] + 1:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
    return out


def _split_surrogates(lo: int, hi: int) -> list[tuple[int, int]]:
    s_lo, s_hi = SURROGATES
    if hi < s_lo or lo > s_hi:
        return [(lo, hi)]
    parts = []
    if lo < s_lo:
        parts.append((lo, s_lo - 1))
    if hi > s_hi:
        parts.append((s_hi + 1, hi))
    return parts


def complement(ranges: Ranges, universe: Ranges | None = None) -> Ranges:
    """``universe`` (all scalar values by default) minus ``ranges``."""
    universe = normalize(universe if universe is not None else [(0, MAX_CODE_POINT)])
    return intersect(universe, _complement_all(normalize(ranges)))


def _complement_all(ranges: Ranges) -> Ranges:
    out: Ranges = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return normalize(out)


def intersect(a: Ranges, b: Ranges) -> Ranges:
    """Intersection of two normalized range lists."""
    out: Ranges = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def char_class(ranges: Iterable[tuple[int, int]]) -> str | None:
    """A regex matching one code point in ``ranges`` (None when empty)."""
    norm = normalize(ranges)
    if not norm:
        return None
    if len(norm) == 1 and norm[0][0] == norm[0][1]:
        return escape_char(norm[0][0])
    # Large sets are written as a negated class of their (small) complement: Python's
    # ``re`` compiles those far faster, and both engines exclude surrogates anyway.
    rest = _complement_all(norm)
    if norm[-1][1] == MAX_CODE_POINT and len(rest) < len(norm):
        return f"[^{_class_body(rest)}]"
    return f"[{_class_body(norm)}]"


def _class_body(ranges: Ranges) -> str:
    return "".join(
        escape_char(lo) if lo == hi else f"{escape_char(lo)}-{escape_char(hi)}" for lo, hi in ranges
    )


def group(r: str) -> str:
    """``r`` as a single atom (wrapped only when needed)."""
    if len(r) <= 1 or _is_atom(r):
        return r
    return f"(?:{r})"


def _is_atom(r: str) -> bool:
    if r.startswith("[") and r.endswith("]") and r.count("[") == 1 and r.count("]") == 1:
        return True
    if _ESCAPE_ATOM.fullmatch(r):
        return True
    if r.startswith("(?:") and r.endswith(")"):
        depth = 0
        for i, ch in enumerate(r):
            if ch == "\\":
                continue
            if ch == "(" and (i == 0 or r[i - 1] != "\\"):
                depth += 1
            elif ch == ")" and r[i - 1] != "\\":
                depth -= 1
                if depth == 0 and i != len(r) - 1:
                    return False
        return True
    return False


def alt(parts: Iterable[str | None]) -> str | None:
    """Alternation of the non-empty languages among ``parts`` (None when all are empty)."""
    seen: list[str] = []
    for p in parts:
        if p is not None and p not in seen:
            seen.append(p)
    if not seen:
        return None
    if len(seen) == 1:
        return seen[0]
    return "(?:" + "|".join(seen) + ")"


def seq(*parts: str | None) -> str | None:
    """Concatenation (None when any part is empty)."""
    if any(p is None for p in parts):
        return None
    return "".join(p for p in parts if p)


def optional(r: str | None) -> str:
    """``r`` or nothing."""
    if r is None or r == "":
        return ""
    return f"{group(r)}?"


def repeat(r: str | None, lo: int, hi: int | None) -> str | None:
    """``r`` repeated ``lo`` to ``hi`` times (``hi=None``: unbounded)."""
    if hi is not None and hi < lo:
        return None
    if r is None:
        return "" if lo == 0 else None
    if r == "" or hi == 0:
        return ""
    g = group(r)
    if hi is None:
        if lo == 0:
            return f"{g}*"
        if lo == 1:
            return f"{g}+"
        return f"{g}{{{lo},}}"
    if lo == hi:
        return g if lo == 1 else f"{g}{{{lo}}}"
    if lo == 0 and hi == 1:
        return f"{g}?"
    return f"{g}{{{lo},{hi}}}"


def join(parts: Sequence[str]) -> str:
    """Plain concatenation of non-empty regexes."""
    return "".join(parts)


_QUANTIFIERS = "?*+{"
#: Deepest nesting Rust ``regex-syntax`` (inside outlines-core) accepts.
MAX_SYNTAX_DEPTH = 250


def syntax_depth(regex: str) -> int:
    """An upper estimate of how deep Rust ``regex-syntax`` sees ``regex`` nested.

    Its parser refuses nesting deeper than 250, where a group, an alternation, a
    concatenation, a repetition and a bracketed class each count one level.
    """
    # Per open group: [deepest child, has "|", some branch with 2+ items, items in branch].
    stack: list[list[int]] = [[0, 0, 0, 0]]
    i, n = 0, len(regex)

    def add(depth: int) -> None:
        nonlocal i
        if i < n and regex[i] in _QUANTIFIERS:
            depth += 1
            if regex[i] == "{":
                i = regex.index("}", i)
            i += 1
            if i < n and regex[i] == "?":
                i += 1
        top = stack[-1]
        top[0] = max(top[0], depth)
        top[3] += 1
        if top[3] > 1:
            top[2] = 1

    while i < n:
        ch = regex[i]
        if ch == "\\":
            i += {"x": 4, "u": 6, "U": 10}.get(regex[i + 1], 2) if i + 1 < n else 1
            add(0)
        elif ch == "[":
            i += 1
            if i < n and regex[i] == "^":
                i += 1
            while i < n and regex[i] != "]":
                i += 2 if regex[i] == "\\" else 1
            i += 1
            add(3)
        elif ch == "(":
            i += 3 if regex.startswith("(?:", i) else 1
            stack.append([0, 0, 0, 0])
        elif ch == ")":
            child, has_alt, multi, _ = stack.pop() if len(stack) > 1 else [0, 0, 0, 0]
            i += 1
            add(1 + child + has_alt + multi)
        elif ch == "|":
            stack[-1][1] = 1
            stack[-1][3] = 0
            i += 1
        else:
            i += 1
            add(0)
    child, has_alt, multi, _ = stack[0]
    return child + has_alt + multi
