"""Translate a JSON Schema ``pattern`` into a regex over the *encoded* string content.

A pattern constrains the decoded string, but the automaton reads JSON text. Each
character set of the pattern is emitted as its unescaped characters plus the
canonical JSON escapes of the characters that must be escaped (``\\"``, ``\\\\``,
control characters), so every matched text decodes to a string the pattern
accepts. Where ECMA-262 (the spec's dialect) and Python ``re`` (what ``jsonschema``
runs) disagree, the translation takes the intersection: ``\\d`` is ``[0-9]``,
``\\w`` is ``[A-Za-z0-9_]``, ``.`` excludes all line terminators, and negated
classes containing ``\\d``/``\\w`` are complemented within ASCII only.

Lookaround, backreferences, word boundaries, flags, Unicode property escapes and
anchors anywhere but the ends of a top-level alternative are refused.
``pattern`` is a search: an alternative without ``^`` (``$``) may be preceded
(followed) by any characters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .regex_text import Ranges, alt, char_class, complement, intersect, literal, normalize, repeat

#: Code points JSON text may carry unescaped (everything but ``"``, ``\\`` and C0 controls).
RAW_RANGES: Ranges = normalize([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)])
_ESCAPED = [0x22, 0x5C, *range(0x20)]
_ASCII: Ranges = [(0, 0x7F)]
_DIGITS: Ranges = [(0x30, 0x39)]
_WORD: Ranges = normalize([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
#: Union of ECMA-262 white space/line terminators and Python's ``str.isspace``.
_SPACE_UNION: Ranges = normalize(
    [
        (0x09, 0x0D),
        (0x1C, 0x20),
        (0x85, 0x85),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ]
)
#: White space both dialects agree on.
_SPACE_BOTH: Ranges = normalize([(0x09, 0x0D), (0x20, 0x20)])
_LINE_TERMINATORS: Ranges = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]


class PatternError(ValueError):
    """The pattern uses a construct that cannot be translated exactly."""


def encoded_unit(ranges: Ranges) -> str | None:
    """Regex for one decoded character in ``ranges``, as JSON string content."""
    norm = normalize(ranges)
    raw = char_class(intersect(norm, RAW_RANGES))
    escapes = []
    for cp in _ESCAPED:
        if any(lo <= cp <= hi for lo, hi in norm):
            escapes.append(literal(json.dumps(chr(cp))[1:-1]))
    return alt([raw, *escapes])


@dataclass
class _Node:
    kind: str  # "chars" | "seq" | "alt" | "repeat" | "start" | "end"
    ranges: Ranges = field(default_factory=list)
    children: list[_Node] = field(default_factory=list)
    lo: int = 0
    hi: int | None = None


@dataclass
class _ClassItem:
    ranges: Ranges
    ascii_only: bool  # a \d or \w style escape whose complement must stay in ASCII


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def error(self, what: str) -> PatternError:
        return PatternError(f"{what} at offset {self.i} of pattern {self.p!r}")

    def peek(self) -> str | None:
        return self.p[self.i] if self.i < len(self.p) else None

    def take(self) -> str:
        ch = self.p[self.i]
        self.i += 1
        return ch

    def parse(self) -> _Node:
        node = self.disjunction()
        if self.i != len(self.p):
            raise self.error("unbalanced ')'")
        return node

    def disjunction(self) -> _Node:
        branches = [self.alternative()]
        while self.peek() == "|":
            self.take()
            branches.append(self.alternative())
        return branches[0] if len(branches) == 1 else _Node("alt", children=branches)

    def alternative(self) -> _Node:
        items: list[_Node] = []
        while self.peek() not in (None, "|", ")"):
            items.append(self.term())
        return _Node("seq", children=items)

    def term(self) -> _Node:
        ch = self.peek()
        if ch == "^":
            self.take()
            return _Node("start")
        if ch == "$":
            self.take()
            return _Node("end")
        atom = self.atom()
        return self.quantified(atom)

    def quantified(self, atom: _Node) -> _Node:
        ch = self.peek()
        bounds: tuple[int, int | None] | None = None
        if ch == "*":
            self.take()
            bounds = (0, None)
        elif ch == "+":
            self.take()
            bounds = (1, None)
        elif ch == "?":
            self.take()
            bounds = (0, 1)
        elif ch == "{":
            bounds = self.braces()
        if bounds is None:
            return atom
        if self.peek() == "?":  # lazy: same language
            self.take()
        if self.peek() in ("*", "+", "?", "{") and self.braces_follow():
            raise self.error("nested quantifier")
        lo, hi = bounds
        if hi is not None and hi < lo:
            raise self.error("quantifier range out of order")
        return _Node("repeat", children=[atom], lo=lo, hi=hi)

    def braces_follow(self) -> bool:
        if self.peek() != "{":
            return True
        save = self.i
        found = self.braces() is not None
        self.i = save
        return found

    def braces(self) -> tuple[int, int | None] | None:
        j = self.p.find("}", self.i)
        if j < 0:
            return None
        body = self.p[self.i + 1 : j]
        parts = body.split(",")
        if (
            len(parts) > 2
            or not parts[0].isdigit()
            or (len(parts) == 2 and parts[1] and not parts[1].isdigit())
        ):
            return None
        self.i = j + 1
        lo = int(parts[0])
        if len(parts) == 1:
            return lo, lo
        return lo, (int(parts[1]) if parts[1] else None)

    def atom(self) -> _Node:
        ch = self.take()
        if ch == ".":
            return _Node("chars", ranges=complement(_LINE_TERMINATORS))
        if ch == "(":
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.p.startswith("?<", self.i) and self.p[self.i + 2 : self.i + 3] not in (
                "=",
                "!",
            ):
                self._skip_name(2)
            elif self.p.startswith("?P<", self.i):
                self._skip_name(3)
            elif self.peek() == "?":
                raise self.error("lookaround or inline flags are not supported")
            inner = self.disjunction()
            if self.peek() != ")":
                raise self.error("missing ')'")
            self.take()
            return _Node("seq", children=[inner])
        if ch == ")":
            raise self.error("unbalanced ')'")
        if ch == "[":
            return self.char_class()
        if ch in "*+?":
            raise self.error("quantifier without an atom")
        if ch == "{" and self.braces_follow_at(self.i - 1):
            raise self.error("quantifier without an atom")
        if ch == "\\":
            item = self.escape(in_class=False)
            return _Node("chars", ranges=item.ranges)
        return _Node("chars", ranges=[(ord(ch), ord(ch))])

    def braces_follow_at(self, pos: int) -> bool:
        save = self.i
        self.i = pos
        found = self.braces() is not None
        self.i = save
        return found

    def _skip_name(self, skip: int) -> None:
        j = self.p.find(">", self.i)
        if j < 0:
            raise self.error("unterminated group name")
        name = self.p[self.i + skip : j]
        if not name.isidentifier():
            raise self.error("bad group name")
        self.i = j + 1

    def escape(self, *, in_class: bool) -> _ClassItem:
        if self.i >= len(self.p):
            raise self.error("trailing backslash")
        ch = self.take()
        simple = {"t": 9, "n": 10, "v": 11, "f": 12, "r": 13}
        if ch in simple:
            cp = simple[ch]
            return _ClassItem([(cp, cp)], False)
        if ch == "d":
            return _ClassItem(list(_DIGITS), False)
        if ch == "w":
            return _ClassItem(list(_WORD), False)
        if ch == "s":
            return _ClassItem(list(_SPACE_BOTH), False)
        if ch == "D":
            return _ClassItem(complement(_DIGITS, _ASCII), True)
        if ch == "W":
            return _ClassItem(complement(_WORD, _ASCII), True)
        if ch == "S":
            return _ClassItem(complement(_SPACE_UNION), False)
        if ch == "b" and in_class:
            return _ClassItem([(8, 8)], False)
        if ch == "0" and not (self.peek() or "").isdigit():
            return _ClassItem([(0, 0)], False)
        if ch == "x":
            return self._hex(2)
        if ch == "u":
            if self.peek() == "{":
                raise self.error("\\u{...} needs the unicode flag")
            return self._hex(4)
        if ch.isalnum() or ch == "_":
            raise self.error(f"unsupported escape \\{ch}")
        return _ClassItem([(ord(ch), ord(ch))], False)

    def _hex(self, n: int) -> _ClassItem:
        digits = self.p[self.i : self.i + n]
        if len(digits) != n or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise self.error("bad hex escape")
        self.i += n
        cp = int(digits, 16)
        if 0xD800 <= cp <= 0xDFFF:
            raise self.error("surrogate escape")
        return _ClassItem([(cp, cp)], False)

    def class_atom(self) -> _ClassItem:
        ch = self.take()
        if ch == "\\":
            return self.escape(in_class=True)
        if ch == "[" and self.peek() in (":", "=", "."):
            raise self.error("POSIX class syntax")
        return _ClassItem([(ord(ch), ord(ch))], False)

    def char_class(self) -> _Node:
        negate = False
        if self.peek() == "^":
            self.take()
            negate = True
        ranges: Ranges = []
        ascii_only = False
        first = True
        while True:
            ch = self.peek()
            if ch is None:
                raise self.error("unterminated character class")
            if ch == "]" and not first:
                self.take()
                break
            if ch == "]" and first:
                raise self.error("empty character class")
            first = False
            start = self.class_atom()
            if self.peek() == "-" and self.p[self.i + 1 : self.i + 2] not in ("]", ""):
                self.take()
                end = self.class_atom()
                if (
                    len(start.ranges) != 1
                    or len(end.ranges) != 1
                    or start.ranges[0][0] != start.ranges[0][1]
                    or end.ranges[0][0] != end.ranges[0][1]
                ):
                    raise self.error("class escape used as a range bound")
                lo, hi = start.ranges[0][0], end.ranges[0][0]
                if hi < lo:
                    raise self.error("range out of order")
                ranges.append((lo, hi))
                continue
            ranges.extend(start.ranges)
            ascii_only = (
                ascii_only or start.ascii_only or start.ranges == _DIGITS or start.ranges == _WORD
            )
        if negate:
            return _Node("chars", ranges=complement(ranges, _ASCII if ascii_only else None))
        return _Node("chars", ranges=normalize(ranges))


def _emit(node: _Node) -> str | None:
    if node.kind == "chars":
        return encoded_unit(node.ranges)
    if node.kind == "seq":
        parts = [_emit(c) for c in node.children]
        if any(p is None for p in parts):
            return None
        joined = "".join(p for p in parts if p is not None)
        return f"(?:{joined})" if "|" in joined and len(node.children) > 1 else joined
    if node.kind == "alt":
        return alt(_emit(c) for c in node.children)
    if node.kind == "repeat":
        return repeat(_emit(node.children[0]), node.lo, node.hi)
    raise PatternError("anchor inside a group or alternative is not supported")


def _flatten(node: _Node) -> list[_Node]:
    return list(node.children) if node.kind == "seq" else [node]


@dataclass(frozen=True)
class TranslatedPattern:
    """The encoded-content regex of a pattern and its decoded length range."""

    regex: str | None
    min_length: int
    max_length: int | None


def translate_pattern(
    pattern: str, min_length: int = 0, max_length: int | None = None
) -> TranslatedPattern:
    """Translate ``pattern`` (search semantics) to a regex over JSON string content.

    With length bounds, each alternative is narrowed to matches of an allowed length
    (:mod:`.pattern_lengths`); alternatives that cannot fit are dropped.
    """
    from .pattern_lengths import fit, length_range

    bounded = min_length > 0 or max_length is not None
    tree = _Parser(pattern).parse()
    branches = tree.children if tree.kind == "alt" else [tree]
    padding = _Node("repeat", children=[_Node("chars", ranges=[(0, 0x10FFFF)])], lo=0, hi=None)
    out: list[str | None] = []
    lo_all: int | None = None
    hi_all: int | None = 0
    for branch in branches:
        items = _flatten(branch)
        anchored_start = bool(items) and items[0].kind == "start"
        if anchored_start:
            items = items[1:]
        anchored_end = bool(items) and items[-1].kind == "end"
        if anchored_end:
            items = items[:-1]
        body = set(range(len(items)))
        if not anchored_start:
            items = [padding, *items]
            body = {i + 1 for i in body}
        if not anchored_end:
            items = [*items, padding]
        node: _Node | None = _Node("seq", children=items)
        if bounded:
            node = fit(items, body, min_length, max_length, node)
            if node is None:
                continue
        a, b = length_range(node)
        lo_all = a if lo_all is None else min(lo_all, a)
        hi_all = None if hi_all is None or b is None else max(hi_all, b)
        out.append(_emit(node))
    return TranslatedPattern(alt(out), lo_all or 0, hi_all)
