"""Objects: properties, required keys, undeclared keys and the keywords about keys.

Properties appear in the order the schema lists them; an object without
``additionalProperties`` gets no undeclared keys. ``patternProperties``,
``propertyNames`` and dependencies are applied to the declared keys, and
``minProperties``/``maxProperties`` narrow which optional members are written.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ..errors import SchemaError
from .ecma_pattern import PatternError, translate_pattern
from .object_members import ordered_members
from .regex_text import alt, literal, optional, repeat, seq
from .schema_keywords import child_pointer, count_keyword
from .schema_scalars import string_not_in

if TYPE_CHECKING:
    from .schema_compiler import Compiler


def compile_object(
    c: Compiler, schema: dict[str, Any], pointer: str, refs: tuple[str, ...]
) -> str | None:
    """Regex of the objects valid for the flat schema ``schema`` (None: no object is)."""
    props = schema.get("properties") or {}
    if not isinstance(props, dict):
        raise SchemaError("properties must be an object", keyword="properties", pointer=pointer)
    required = schema.get("required") or []
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaError(
            "required must be an array of strings", keyword="required", pointer=pointer
        )
    extra_schema = schema.get("additionalProperties", False)
    if "additionalProperties" not in schema and "unevaluatedProperties" in schema:
        # Only declared (evaluated) keys are written; undeclared required keys are unevaluated.
        extra_for_required: Any = schema["unevaluatedProperties"]
    else:
        extra_for_required = schema.get("additionalProperties", True)
    required = list(dict.fromkeys(required))
    names = list(props)
    for name in required:
        if name not in props:
            names.append(name)
    values: dict[str, list[tuple[Any, str]]] = {}
    for name in names:
        if name in props:
            values[name] = [(props[name], child_pointer(pointer, "properties", name))]
        else:
            values[name] = [(extra_for_required, child_pointer(pointer, "additionalProperties"))]
    generates_extra = extra_schema is not False
    forbidden: set[str] = set()
    _pattern_properties(c, schema, pointer, names, values, generates_extra)
    _property_names(c, schema, pointer, names, forbidden, generates_extra)
    _dependencies(c, schema, pointer, names, required, forbidden, generates_extra)
    if any(name in forbidden for name in required):
        return None
    names = [n for n in names if n not in forbidden]
    min_props = count_keyword(schema, "minProperties", pointer)
    max_props = count_keyword(schema, "maxProperties", pointer)
    ws = c.ws
    entries: list[tuple[str, str, bool]] = []  # (name, regex of `"name":value`, required)
    for name in names:
        subs = values[name]
        if len(subs) == 1:
            sub, sptr = subs[0]
        else:
            sub, sptr = {"allOf": [x for x, _ in subs]}, subs[0][1]
        value = c.sub(sub, sptr, refs)
        is_required = name in required
        if value is None:
            if is_required:
                return None
            continue
        key = literal(json.dumps(name, ensure_ascii=False))
        entries.append((name, f"{key}{ws}\\x3a{ws}{value}", is_required))
    extra: str | None = None
    if extra_schema is not False:
        value = c.sub(extra_schema, child_pointer(pointer, "additionalProperties"), refs)
        key = string_not_in(set(props) | set(required))
        extra = None if value is None or key is None else f"{key}{ws}\\x3a{ws}{value}"
    entries, extra = _property_counts(c, entries, extra, min_props, max_props, pointer)
    if entries is None:
        return None
    comma = f"{ws}\\x2c{ws}"

    declared = ordered_members([(e, r) for _, e, r in entries], comma)
    can_be_empty = not any(r for _, _, r in entries)
    parts: list[str | None] = []
    if extra is None:
        parts.append(declared)
        if can_be_empty:
            parts.append("")
    else:
        parts.append(seq(declared, repeat(seq(comma, extra), 0, None)))
        if can_be_empty:
            parts.append(optional(seq(extra, repeat(seq(comma, extra), 0, None))))
    inner = alt(parts)
    if inner is None:
        return None
    return f"\\x7b{ws}{inner}{ws}\\x7d"


def _property_counts(
    c: Compiler,
    entries: list[tuple[str, str, bool]],
    extra: str | None,
    min_props: int | None,
    max_props: int | None,
    pointer: str,
) -> tuple[list[tuple[str, str, bool]] | None, str | None]:
    """Narrow the members to ``minProperties``/``maxProperties``: the first optional
    members become required, or the members past the budget (and undeclared keys)
    are never written. (None, None) when no object can fit."""
    entries = list(entries)
    n_required = sum(r for _, _, r in entries)
    if min_props is not None and min_props > n_required:
        for i, (name, entry, req) in enumerate(entries):
            if n_required >= min_props:
                break
            if not req:
                entries[i] = (name, entry, True)
                n_required += 1
        if n_required < min_props:
            c.refuse("minProperties", pointer, "fewer declared properties than required")
    if max_props is not None and (extra is not None or len(entries) > max_props):
        if max_props < n_required:
            return None, None
        budget = max_props - n_required
        kept = []
        for name, entry, req in entries:
            if req or budget > 0:
                kept.append((name, entry, req))
                budget -= not req
        entries, extra = kept, None
    return entries, extra


def _pattern_properties(
    c: Compiler,
    schema: dict[str, Any],
    pointer: str,
    names: list[str],
    values: dict[str, list[tuple[Any, str]]],
    generates_extra: bool,
) -> None:
    """Add each matching ``patternProperties`` schema to the declared keys it applies to."""
    pats = schema.get("patternProperties")
    if not pats:
        return
    if not isinstance(pats, dict):
        raise SchemaError(
            "patternProperties must be an object", keyword="patternProperties", pointer=pointer
        )
    if generates_extra:
        c.refuse("patternProperties", pointer, "together with additionalProperties")
        return
    for pat, sub in pats.items():
        try:
            python_re = re.compile(pat)
            ours = translate_pattern(pat)
        except (re.error, PatternError) as exc:
            c.refuse("patternProperties", pointer, f"pattern {pat!r}: {exc}")
            return
        ours_re = re.compile(ours.regex or "(?!)")
        for name in names:
            hit = python_re.search(name) is not None
            encoded = json.dumps(name, ensure_ascii=False)[1:-1]
            if hit != (ours_re.fullmatch(encoded) is not None):
                c.refuse("patternProperties", pointer, f"pattern {pat!r} is ambiguous for {name!r}")
                return
            if hit:
                values[name].append((sub, child_pointer(pointer, "patternProperties", pat)))


def _property_names(
    c: Compiler,
    schema: dict[str, Any],
    pointer: str,
    names: list[str],
    forbidden: set[str],
    generates_extra: bool,
) -> None:
    """``propertyNames``: declared keys that fail it can never be written."""
    rule = schema.get("propertyNames", True)
    if rule is True or rule == {}:
        return
    if generates_extra:
        c.refuse("propertyNames", pointer, "together with additionalProperties")
        return
    for name in names:
        if not c.is_valid(name, rule):
            forbidden.add(name)


def _dependencies(
    c: Compiler,
    schema: dict[str, Any],
    pointer: str,
    names: list[str],
    required: list[str],
    forbidden: set[str],
    generates_extra: bool,
) -> None:
    """Dependent keys: a required trigger makes its dependents required; an optional
    trigger whose dependents are not all required is never written (a narrowing)."""
    rules: list[tuple[str, str, Any]] = []
    for key in ("dependentRequired", "dependentSchemas", "dependencies"):
        for trigger, dep in (schema.get(key) or {}).items():
            rules.append((key, trigger, dep))
    for key, trigger, dep in rules:
        if trigger not in names:
            if generates_extra:
                c.refuse(key, pointer, f"trigger {trigger!r} may appear as an undeclared key")
            continue
        if isinstance(dep, list):
            if trigger in required:
                for d in dep:
                    if d not in required:
                        required.append(d)
                        if d not in names:
                            c.refuse(key, pointer, f"dependent key {d!r} is not declared")
            elif not all(d in required for d in dep):
                forbidden.add(trigger)
        elif dep is True or dep == {}:
            continue
        elif trigger in required:
            c.refuse(key, pointer, f"schema dependency of required key {trigger!r}")
        else:
            forbidden.add(trigger)
