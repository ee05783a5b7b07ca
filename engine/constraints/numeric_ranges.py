"""Exact regexes for integer and decimal ranges in canonical JSON number syntax.

Integers are written without leading zeros and never as ``-0``. Numbers with a
fraction part live on a grid of ``FRACTION_DIGITS`` decimals with at most
``INTEGER_DIGITS`` integer digits: every such decimal has at most 15 significant
digits, so distinct grid points parse to distinct doubles and float rounding is
monotone on the grid. Bounds are then applied to the parsed float exactly as a
validator compares it (``float(text) >= minimum``), never to the decimal text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from .regex_text import alt, literal, optional, seq

FRACTION_DIGITS = 6
INTEGER_DIGITS = 9
_DIGIT = "[0-9]"


@dataclass(frozen=True)
class Bound:
    """A numeric bound as written in the schema."""

    value: int | float
    exclusive: bool


def _digits(lo: str, hi: str) -> str:
    if lo == hi:
        return lo
    return f"[{lo}-{hi}]"


def _same_length(lo: str, hi: str) -> str | None:
    """Digit strings of equal length between ``lo`` and ``hi`` inclusive."""
    if lo > hi:
        return None
    n = len(lo)
    if n == 0:
        return ""
    if lo == hi:
        return lo
    rest = n - 1
    if lo[1:] == "0" * rest and hi[1:] == "9" * rest:
        return _digits(lo[0], hi[0]) + (f"{_DIGIT}{{{rest}}}" if rest > 1 else _DIGIT * rest)
    if lo[0] == hi[0]:
        inner = _same_length(lo[1:], hi[1:])
        return None if inner is None else lo[0] + _group_alt(inner)
    parts = [lo[0] + _group_alt(_same_length(lo[1:], "9" * rest) or "")]
    if int(lo[0]) + 1 <= int(hi[0]) - 1:
        any_rest = f"{_DIGIT}{{{rest}}}" if rest > 1 else _DIGIT * rest
        parts.append(_digits(str(int(lo[0]) + 1), str(int(hi[0]) - 1)) + any_rest)
    parts.append(hi[0] + _group_alt(_same_length("0" * rest, hi[1:]) or ""))
    return alt(parts)


def _group_alt(r: str) -> str:
    return f"(?:{r})" if "|" in r and not (r.startswith("(?:") and r.endswith(")")) else r


def natural_range(lo: int, hi: int | None) -> str | None:
    """Canonical decimal texts of the integers in ``[lo, hi]`` (``lo >= 0``; ``hi=None``: unbounded)."""
    if lo < 0:
        raise ValueError("natural_range needs lo >= 0")
    if hi is not None and hi < lo:
        return None
    parts: list[str | None] = []
    lo_len = len(str(lo))
    top_len = len(str(hi)) if hi is not None else lo_len
    for length in range(lo_len, top_len + 1):
        a = lo if length == lo_len else 10 ** (length - 1)
        b = hi if (hi is not None and length == top_len) else 10**length - 1
        if length == 1:
            parts.append(_digits(str(a), str(b)))
        else:
            parts.append(_same_length(str(a), str(b)))
    if hi is None:
        parts.append(f"[1-9]{_DIGIT}{{{lo_len},}}")
    return alt(parts)


def integer_range(lo: int | None, hi: int | None) -> str | None:
    """Canonical JSON texts of the integers in ``[lo, hi]`` (None: unbounded side)."""
    if lo is not None and hi is not None and hi < lo:
        return None
    parts: list[str | None] = []
    if lo is None or lo < 0:
        neg_hi = -1 if hi is None else min(hi, -1)
        if lo is None or lo <= neg_hi:
            mags = natural_range(-neg_hi, None if lo is None else -lo)
            parts.append(seq("\\x2d", mags))
    if hi is None or hi >= 0:
        parts.append(natural_range(max(lo, 0) if lo is not None else 0, hi))
    return alt(parts)


def lowest_integer(bound: Bound) -> int:
    """The smallest integer n with ``n >= value`` (``>`` when exclusive), compared exactly."""
    d = Decimal(bound.value)
    if bound.exclusive:
        return math.floor(d) + 1
    return math.ceil(d)


def highest_integer(bound: Bound) -> int:
    """The largest integer n with ``n <= value`` (``<`` when exclusive), compared exactly."""
    d = Decimal(bound.value)
    if bound.exclusive:
        return math.ceil(d) - 1
    return math.floor(d)


def _grid_value(n: int) -> float:
    return float(Decimal(n).scaleb(-FRACTION_DIGITS))


def _satisfies_low(n: int, bound: Bound) -> bool:
    x = _grid_value(n)
    return x > bound.value if bound.exclusive else x >= bound.value


def _satisfies_high(n: int, bound: Bound) -> bool:
    x = _grid_value(n)
    return x < bound.value if bound.exclusive else x <= bound.value


def _grid_low(bound: Bound | None, limit: int) -> int:
    if bound is None:
        return -limit
    d = Decimal(bound.value).scaleb(FRACTION_DIGITS)
    if d < -limit:
        return -limit
    if d > limit:
        return limit + 1
    n = math.ceil(d)
    while not _satisfies_low(n, bound):
        n += 1
    while n - 1 >= -limit and _satisfies_low(n - 1, bound):
        n -= 1
    return n


def _grid_high(bound: Bound | None, limit: int) -> int:
    if bound is None:
        return limit
    d = Decimal(bound.value).scaleb(FRACTION_DIGITS)
    if d > limit:
        return limit
    if d < -limit:
        return -limit - 1
    n = math.floor(d)
    while not _satisfies_high(n, bound):
        n -= 1
    while n + 1 <= limit and _satisfies_high(n + 1, bound):
        n += 1
    return n


def _fraction(lo: str | None, hi: str | None, width: int, first: bool) -> str | None:
    """Fraction digit strings s (1..width digits) whose zero-padding lies in [lo, hi]."""
    if lo is None and hi is None:
        lower = 1 if first else 0
        if width == 0:
            return "" if lower == 0 else None
        return f"{_DIGIT}{{{lower},{width}}}" if width > 1 or lower == 0 else _DIGIT
    if width == 0:
        return None if first else ""
    parts: list[str | None] = []
    if not first and (lo is None or set(lo) == {"0"}):
        parts.append("")
    lo_d = int(lo[0]) if lo is not None else 0
    hi_d = int(hi[0]) if hi is not None else 9
    if lo is not None and hi is not None and lo_d == hi_d:
        parts.append(seq(str(lo_d), _fraction(lo[1:], hi[1:], width - 1, False)))
    else:
        if lo is not None:
            parts.append(seq(str(lo_d), _fraction(lo[1:], None, width - 1, False)))
            lo_d += 1
        if hi is not None:
            parts.append(seq(str(hi_d), _fraction(None, hi[1:], width - 1, False)))
            hi_d -= 1
        if lo_d <= hi_d:
            parts.append(
                _digits(str(lo_d), str(hi_d)) + (f"{_DIGIT}{{0,{width - 1}}}" if width > 1 else "")
            )
    return alt(parts)


def _positive_decimal(a: int, b: int) -> str | None:
    """Texts ``I.F`` (1..FRACTION_DIGITS fraction digits) with grid value in [a, b], a >= 0."""
    if b < a:
        return None
    unit = 10**FRACTION_DIGITS
    ia, fa = divmod(a, unit)
    ib, fb = divmod(b, unit)
    fa_s, fb_s = f"{fa:0{FRACTION_DIGITS}d}", f"{fb:0{FRACTION_DIGITS}d}"
    dot = "\\x2e"
    if ia == ib:
        return seq(literal(str(ia)), dot, _fraction(fa_s, fb_s, FRACTION_DIGITS, True))
    parts = [
        seq(literal(str(ia)), dot, _fraction(fa_s, None, FRACTION_DIGITS, True)),
        seq(
            natural_range(ia + 1, ib - 1) if ia + 1 <= ib - 1 else None,
            dot,
            _fraction(None, None, FRACTION_DIGITS, True),
        ),
        seq(literal(str(ib)), dot, _fraction(None, fb_s, FRACTION_DIGITS, True)),
    ]
    return alt(parts)


def number_range(lo: Bound | None, hi: Bound | None) -> str | None:
    """JSON number texts whose parsed value satisfies both bounds exactly.

    Integer texts (any size) are compared exactly; texts with a fraction part are
    limited to the grid described in the module docstring; no exponents.
    """
    ints = integer_range(
        lowest_integer(lo) if lo is not None else None,
        highest_integer(hi) if hi is not None else None,
    )
    limit = 10 ** (INTEGER_DIGITS + FRACTION_DIGITS) - 1
    n_lo, n_hi = _grid_low(lo, limit), _grid_high(hi, limit)
    parts: list[str | None] = [ints]
    if n_lo <= n_hi:
        if n_lo < 0:
            neg_top = min(n_hi, -1)
            parts.append(seq("\\x2d", _positive_decimal(-neg_top, -n_lo)))
        if n_hi >= 0:
            parts.append(_positive_decimal(max(n_lo, 0), n_hi))
    return alt(parts)


def any_number(*, integer: bool) -> str:
    """Unbounded JSON numbers (exponents limited to two digits so values stay finite)."""
    if integer:
        return "(?:0|\\x2d?[1-9][0-9]*)"
    return (
        "\\x2d?(?:0|[1-9][0-9]*)"
        + optional("\\x2e[0-9]+")
        + optional("[eE][\\x2b\\x2d]?[0-9]{1,2}")
    )
