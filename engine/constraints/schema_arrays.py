"""Arrays: ``prefixItems``, ``items``, item counts and finite ``uniqueItems``.

Elements are written in order; ``uniqueItems`` is enforced only when the items
form a finite set (an enum, a const or booleans), each value written at most
once in the listed order.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..errors import SchemaError
from .json_values import canonical
from .object_members import ordered_members
from .regex_text import literal, optional, repeat, seq
from .schema_keywords import child_pointer, count_keyword
from .schema_merge import merge_flat

if TYPE_CHECKING:
    from .schema_compiler import Compiler


def compile_array(
    c: Compiler, schema: dict[str, Any], pointer: str, refs: tuple[str, ...]
) -> str | None:
    """Regex of the arrays valid for the flat schema ``schema`` (None: no array is)."""
    for key in ("contains", "minContains", "maxContains", "unevaluatedItems"):
        if key in schema and not (key == "unevaluatedItems" and schema[key] is True):
            if key in ("minContains", "maxContains") and "contains" not in schema:
                continue
            c.refuse(key, pointer, "not supported by the constraint compiler")
    min_items = count_keyword(schema, "minItems", pointer) or 0
    max_items = count_keyword(schema, "maxItems", pointer)
    prefix_schemas = schema.get("prefixItems") or []
    if not isinstance(prefix_schemas, list):
        raise SchemaError("prefixItems must be an array", keyword="prefixItems", pointer=pointer)
    if schema.get("uniqueItems") is True and (max_items is None or max_items > 1):
        values = (
            None
            if prefix_schemas
            else _finite_items(c, schema.get("items", True), child_pointer(pointer, "items"), refs)
        )
        if values is not None:
            return _unique_array(c, values, min_items, max_items)
        c.refuse("uniqueItems", pointer, "uniqueness is enforced only for finite item sets")
    prefix = [
        c.sub(s, child_pointer(pointer, "prefixItems", i), refs)
        for i, s in enumerate(prefix_schemas)
    ]
    items_schema = schema.get("items", True)
    item = (
        None
        if items_schema is False
        else c.sub(items_schema, child_pointer(pointer, "items"), refs)
    )
    ws = c.ws
    comma = f"{ws}\\x2c{ws}"

    def tail(i: int) -> str | None:
        """Elements from index i on, given i elements already written."""
        if max_items is not None and i >= max_items:
            return ""
        if i < len(prefix):
            elem = prefix[i]
            rest = tail(i + 1)
            body = seq(comma if i > 0 else "", elem, rest)
            if i < min_items:
                return body
            return optional(body) if body is not None else ""
        if item is None:
            return "" if i >= min_items else None
        lo = max(0, min_items - i)
        hi = None if max_items is None else max_items - i
        if i > 0:
            return repeat(seq(comma, item), lo, hi)
        first_rest = repeat(seq(comma, item), max(0, lo - 1), None if hi is None else hi - 1)
        body = seq(item, first_rest)
        return body if lo > 0 else optional(body)

    inner = tail(0)
    if inner is None:
        return None
    return f"\\x5b{ws}{inner}{ws}\\x5d" if inner else f"\\x5b{ws}\\x5d"


def _finite_items(c: Compiler, items: Any, pointer: str, refs: tuple[str, ...]) -> list[Any] | None:
    """The distinct valid values of an ``items`` schema that is an enum, a const or
    boolean (None when it is not finite in one of these ways)."""
    expanded = c.expand(items, pointer, refs)
    if expanded is None:
        return []
    if expanded.combos or not expanded.flat:
        return None
    merged = merge_flat([p for p, _ in expanded.flat], pointer)
    if "const" in merged:
        candidates = [merged["const"]]
    elif isinstance(merged.get("enum"), list):
        candidates = list(merged["enum"])
    elif merged.get("type") in ("boolean", ["boolean"]):
        candidates = [True, False]
    else:
        return None
    out: list[Any] = []
    seen: set[Any] = set()
    for value in candidates:
        c.tick(pointer)
        key = canonical(value)
        if key not in seen and c.is_valid(value, items):
            seen.add(key)
            out.append(value)
    return out


def _unique_array(
    c: Compiler, values: list[Any], min_items: int, max_items: int | None
) -> str | None:
    """Arrays of distinct ``values``: each written at most once, in the listed order (a
    narrowing); the first ``min_items`` are always written."""
    texts = [literal(json.dumps(v, ensure_ascii=False, separators=(",", ":"))) for v in values]
    if max_items is not None:
        texts = texts[:max_items]
    if min_items > len(texts):
        return None
    ws = c.ws
    members = ordered_members([(t, i < min_items) for i, t in enumerate(texts)], f"{ws}\\x2c{ws}")
    if members is None:
        return f"\\x5b{ws}\\x5d"
    inner = members if min_items > 0 else optional(members)
    return f"\\x5b{ws}{inner}{ws}\\x5d"
