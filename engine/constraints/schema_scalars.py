"""Strings and numbers: the regexes of the scalar schemas.

Numbers with bounds are written without an exponent and with at most six
fraction digits (:mod:`.numeric_ranges`); strings use only the escapes JSON
requires, and a ``pattern`` or ``format`` is translated exactly or refused.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..errors import SchemaError
from .ecma_pattern import PatternError, encoded_unit, translate_pattern
from .numeric_ranges import (
    Bound,
    any_number,
    highest_integer,
    integer_range,
    lowest_integer,
    number_range,
)
from .regex_text import alt, complement, literal, repeat, seq
from .string_formats import NUMERIC_FORMAT_RANGES, REFUSED_FORMATS, string_format

if TYPE_CHECKING:
    from .schema_compiler import Compiler

#: The whole compiler logs under the front end's name, ``agentflow.engine.constraints.schema``.
logger = logging.getLogger(f"{__package__}.schema")

QUOTE = "\\x22"
#: Any single character of a JSON string's content, escapes included (never a lone surrogate).
#: (The raw class already excludes ``"`` and ``\\``; their escapes are in the escape branch.)
ANY_UNIT = (
    "(?:[^\\x00-\\x1f\\x22\\x5c]|\\x5c(?:[\\x22\\x5c\\x2fbfnrt]"
    "|u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})))"
)
#: Characters of an undeclared key: no escapes, so the key's text is its decoded value.
_KEY_CHAR_RANGES = [(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)]


def compile_number(
    c: Compiler, schema: dict[str, Any], pointer: str, *, integer: bool
) -> str | None:
    """Regex of the numbers (integers when ``integer``) within ``schema``'s bounds or format."""
    for key in ("multipleOf", "divisibleBy"):
        if key in schema:
            m = schema[key]
            if not (integer and isinstance(m, (int, float)) and not isinstance(m, bool) and m == 1):
                c.refuse(key, pointer, "multiples are not enforced")
    lows: list[Bound] = []
    highs: list[Bound] = []
    for key, exclusive, side in (
        ("minimum", False, lows),
        ("exclusiveMinimum", True, lows),
        ("maximum", False, highs),
        ("exclusiveMaximum", True, highs),
    ):
        if key in schema:
            v = schema[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise SchemaError(f"{key} must be a number", keyword=key, pointer=pointer)
            side.append(Bound(v, exclusive))
    fmt = schema.get("format")
    if fmt is not None:
        if fmt in NUMERIC_FORMAT_RANGES:
            rng = NUMERIC_FORMAT_RANGES[fmt]
            if rng is not None:
                lows.append(Bound(rng[0], False))
                highs.append(Bound(rng[1], False))
        elif not isinstance(fmt, str) or fmt in REFUSED_FORMATS:
            c.refuse("format", pointer, f"format {fmt!r} is not supported")
    lo = _strictest(lows, low=True)
    hi = _strictest(highs, low=False)
    if lo is None and hi is None:
        return any_number(integer=integer)
    if integer:
        return integer_range(
            lowest_integer(lo) if lo is not None else None,
            highest_integer(hi) if hi is not None else None,
        )
    return number_range(lo, hi)


def compile_string(c: Compiler, schema: dict[str, Any], pointer: str) -> str | None:
    """Regex of the JSON strings valid for ``schema``'s length, ``pattern`` and ``format``."""
    min_len = schema.get("minLength", 0)
    max_len = schema.get("maxLength")
    for key, v in (("minLength", min_len), ("maxLength", max_len)):
        if v is not None and (
            isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v)
        ):
            raise SchemaError(f"{key} must be a non-negative integer", keyword=key, pointer=pointer)
    min_len = int(min_len)
    max_len = None if max_len is None else int(max_len)
    fmt = schema.get("format")
    pattern = schema.get("pattern")
    if fmt is not None and not isinstance(fmt, str):
        raise SchemaError("format must be a string", keyword="format", pointer=pointer)
    if fmt is not None and fmt not in NUMERIC_FORMAT_RANGES:
        spec = string_format(fmt)
        if spec is None:
            if fmt in REFUSED_FORMATS:
                c.refuse("format", pointer, f"format {fmt!r} is not supported")
            else:
                logger.debug("format %r at %s is not a JSON Schema format: ignored", fmt, pointer)
        else:
            if pattern is not None:
                c.refuse("pattern", pointer, "pattern together with format")
            if spec.min_length < min_len or (
                max_len is not None and (spec.max_length is None or spec.max_length > max_len)
            ):
                if max_len is not None and max_len < spec.min_length:
                    return None
                # The format's regex read as an anchored pattern, narrowed to the bounds.
                try:
                    fitted = translate_pattern(f"^(?:{spec.regex})$", min_len, max_len).regex
                except PatternError:
                    fitted = None
                if fitted is not None:
                    return seq(QUOTE, fitted, QUOTE)
                c.refuse(
                    "maxLength" if max_len is not None else "minLength",
                    pointer,
                    f"length bounds together with format {fmt!r}",
                )
            return seq(QUOTE, spec.regex, QUOTE)
    elif fmt in NUMERIC_FORMAT_RANGES:
        c.refuse("format", pointer, f"format {fmt!r} applies to numbers, not strings")
    if pattern is not None:
        if not isinstance(pattern, str):
            raise SchemaError("pattern must be a string", keyword="pattern", pointer=pointer)
        try:
            tp = translate_pattern(pattern)
        except PatternError as exc:
            c.refuse("pattern", pointer, str(exc))
            return seq(QUOTE, repeat(ANY_UNIT, min_len, max_len), QUOTE)
        if tp.regex is None:
            return None
        fits = tp.min_length >= min_len and (
            max_len is None or (tp.max_length is not None and tp.max_length <= max_len)
        )
        if not fits:
            if max_len is not None and tp.min_length > max_len:
                return None
            # Narrow the pattern's repeats to the length bounds (a sound subset).
            bounded = translate_pattern(pattern, min_len, max_len)
            if bounded.regex is not None:
                return seq(QUOTE, bounded.regex, QUOTE)
            c.refuse(
                "maxLength" if max_len is not None else "minLength",
                pointer,
                "length bounds together with a pattern whose lengths differ",
            )
        return seq(QUOTE, tp.regex, QUOTE)
    if "__not_strings__" in schema:
        return string_not_in(set(schema["__not_strings__"]))
    return seq(QUOTE, repeat(ANY_UNIT, min_len, max_len), QUOTE)


def _strictest(bounds: list[Bound], *, low: bool) -> Bound | None:
    """The tightest of ``bounds``: the highest lower (``low``) or the lowest upper bound."""
    best: Bound | None = None
    for b in bounds:
        if best is None:
            best = b
            continue
        if ((b.value > best.value) if low else (b.value < best.value)) or (
            b.value == best.value and b.exclusive
        ):
            best = b
    return best


def string_not_in(excluded: set[str]) -> str | None:
    """A JSON string (no escapes) whose value is none of ``excluded``."""
    names = [n for n in excluded if all(ord(c) >= 0x20 and c not in '"\\' for c in n)]
    trie: dict[str, Any] = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[""] = {}
    any_char = encoded_unit(_KEY_CHAR_RANGES)

    def rest(node: dict[str, Any]) -> str:
        """Continuations from this trie node that leave the excluded set."""
        parts: list[str | None] = []
        if "" not in node:
            parts.append("")
        children = [c for c in node if c]
        for ch in children:
            parts.append(seq(literal(ch), rest(node[ch])))
        others = [(lo, hi) for lo, hi in _KEY_CHAR_RANGES]
        other_class = encoded_unit(complement([(ord(c), ord(c)) for c in children], others))
        if other_class is not None:
            parts.append(seq(other_class, f"{any_char}*"))
        return alt(parts) or ""

    body = rest(trie)
    return f"{QUOTE}{body}{QUOTE}"
