"""Regexes for the string formats the compiler enforces (content between the quotes).

Each format is a strict subset of what RFC 3339 / RFC 3986 / RFC 5321 / RFC 4291
allow, chosen so every string it admits is valid under the format checkers of
``jsonschema`` and the common validators: an ASCII-only, escape-free subset.
"""

from __future__ import annotations

from dataclasses import dataclass

from .regex_text import alt


@dataclass(frozen=True)
class StringFormat:
    """A format's content regex and its length range in characters."""

    regex: str
    min_length: int
    max_length: int | None


_D = "[0-9]"
_HEX = "[0-9a-fA-F]"
_ALNUM = "[0-9A-Za-z]"
_DASH, _DOT, _COLON = "\\x2d", "\\x2e", "\\x3a"


def _date() -> str:
    year = f"{_D}{{4}}"
    leap_year = f"(?:{_D}{{2}}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
    month_day = alt(
        [
            f"(?:0[13578]|1[02]){_DASH}(?:0[1-9]|[12][0-9]|3[01])",
            f"(?:0[469]|11){_DASH}(?:0[1-9]|[12][0-9]|30)",
            f"02{_DASH}(?:0[1-9]|1[0-9]|2[0-8])",
        ]
    )
    return f"(?:{year}{_DASH}{month_day}|{leap_year}{_DASH}02{_DASH}29)"


def _time() -> str:
    hms = f"(?:[01][0-9]|2[0-3]){_COLON}[0-5][0-9]{_COLON}[0-5][0-9]"
    frac = f"(?:{_DOT}{_D}{{1,9}})?"
    offset = f"(?:Z|[\\x2b\\x2d](?:[01][0-9]|2[0-3]){_COLON}[0-5][0-9])"
    return f"{hms}{frac}{offset}"


def _label(max_len: int) -> str:
    # No two hyphens in a row: "xn--" labels must be valid punycode, which we never write.
    return f"{_ALNUM}(?:\\x2d?{_ALNUM}){{0,{(max_len - 1) // 2}}}"


def _hostname() -> str:
    label = _label(62)
    return f"{label}(?:{_DOT}{label}){{0,3}}"


def _ipv4() -> str:
    octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
    return f"{octet}(?:{_DOT}{octet}){{3}}"


def _ipv6() -> str:
    h16 = f"{_HEX}{{1,4}}"
    forms = [f"(?:{h16}{_COLON}){{7}}{h16}"]
    for left in range(8):
        for right in range(8 - left):
            if left + right > 7:
                continue
            lpart = (
                "" if left == 0 else f"{h16}(?:{_COLON}{h16}){{{left - 1}}}" if left > 1 else h16
            )
            rpart = (
                "" if right == 0 else f"{h16}(?:{_COLON}{h16}){{{right - 1}}}" if right > 1 else h16
            )
            forms.append(f"{lpart}{_COLON}{_COLON}{rpart}")
    return alt(forms) or ""


def _email() -> str:
    local = "[0-9A-Za-z](?:[0-9A-Za-z\\x2b\\x5f]|[\\x2d\\x2e][0-9A-Za-z]){0,63}"
    return f"{local}\\x40{_label(62)}(?:{_DOT}{_label(62)}){{1,3}}"


def _uri() -> str:
    scheme = "[A-Za-z][0-9A-Za-z\\x2b\\x2d\\x2e]{0,15}"
    pchar = "(?:[0-9A-Za-z\\x2d\\x2e\\x5f\\x7e\\x21\\x24\\x26\\x27\\x28\\x29\\x2a\\x2b\\x2c\\x3b\\x3d\\x3a\\x40]|\\x25[0-9A-Fa-f]{2})"
    host = f"{_label(62)}(?:{_DOT}{_label(62)}){{0,3}}"
    authority = f"\\x2f\\x2f{host}(?:{_COLON}[0-9]{{1,5}})?"
    path = f"(?:\\x2f{pchar}*)*"
    query = f"(?:\\x3f(?:{pchar}|[\\x2f\\x3f])*)?"
    fragment = f"(?:\\x23(?:{pchar}|[\\x2f\\x3f])*)?"
    return f"{scheme}{_COLON}{authority}{path}{query}{fragment}"


def _uuid() -> str:
    return f"{_HEX}{{8}}{_DASH}{_HEX}{{4}}{_DASH}{_HEX}{{4}}{_DASH}{_HEX}{{4}}{_DASH}{_HEX}{{12}}"


def string_format(name: str) -> StringFormat | None:
    """The enforced regex of a format, or None when the format is not supported."""
    if name == "date":
        return StringFormat(_date(), 10, 10)
    if name == "time":
        return StringFormat(_time(), 9, 24)
    if name == "date-time":
        return StringFormat(f"{_date()}T{_time()}", 20, 35)
    if name == "email":
        return StringFormat(_email(), 6, None)
    if name == "uuid":
        return StringFormat(_uuid(), 36, 36)
    if name in ("uri", "url"):
        return StringFormat(_uri(), 5, None)
    if name == "byte":
        b64 = "[0-9A-Za-z\\x2b\\x2f]"
        return StringFormat(f"(?:{b64}{{4}})*(?:{b64}{{2}}\\x3d\\x3d|{b64}{{3}}\\x3d)?", 0, None)
    if name == "ipv4":
        return StringFormat(_ipv4(), 7, 15)
    if name == "ipv6":
        return StringFormat(_ipv6(), 2, 39)
    if name == "hostname":
        return StringFormat(_hostname(), 1, 251)
    return None


#: Formats defined by JSON Schema (and OpenAPI's ``byte``/``binary``) that are not enforced:
#: refused. Formats outside these lists are annotations no validator asserts, and are ignored.
REFUSED_FORMATS = frozenset(
    {
        "uri-reference",
        "iri",
        "iri-reference",
        "idn-email",
        "idn-hostname",
        "regex",
        "json-pointer",
        "relative-json-pointer",
        "uri-template",
        "duration",
        "binary",
    }
)

SUPPORTED_FORMATS: tuple[str, ...] = (
    "date",
    "time",
    "date-time",
    "email",
    "uuid",
    "uri",
    "ipv4",
    "ipv6",
    "hostname",
    "url",
    "byte",
)

#: Numeric formats (OpenAPI): int32/int64 are enforced as ranges, float/double add nothing.
NUMERIC_FORMAT_RANGES: dict[str, tuple[int, int] | None] = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "float": None,
    "double": None,
}
