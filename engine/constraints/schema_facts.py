"""Conservative facts about a schema, used to prove ``oneOf`` branches disjoint.

``oneOf`` accepts a value valid for exactly one branch; the compiler emits the
union of the branches, which is exact only when no value generated from one
branch is valid for another. :func:`excludes` proves that for the easy, common
shapes — different JSON types, disjoint ``const``/``enum`` values, a
discriminator property with different constant values, a required key the other
branch can never produce — and answers False (cannot prove) otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .json_values import canonical, json_type
from .schema_keywords import JSON_TYPES, keyword_families


@dataclass
class Facts:
    """Over-approximations (types, values, keys) and under-approximations (required keys)."""

    types: frozenset[str]
    values: list[Any] | None = None  # every accepted value is one of these
    required: frozenset[str] = frozenset()  # keys present in every accepted object
    prop_values: dict[str, list[Any]] = field(default_factory=dict)  # key -> the values it can take
    keys: frozenset[str] | None = None  # every key an accepted object can have (None: any)
    absent: frozenset[str] = frozenset()  # keys no accepted object has (``properties: {k: false}``)


def _family_types(schema: dict[str, Any]) -> frozenset[str]:
    t = schema.get("type")
    if t is not None:
        names = [t] if isinstance(t, str) else list(t)
        return frozenset("number" if n == "integer" else n for n in names)
    return frozenset(JSON_TYPES)


def _generated_types(schema: dict[str, Any]) -> frozenset[str]:
    """Types the compiler emits for a flat schema (it narrows untyped schemas to their keyword families)."""
    if "type" in schema:
        return _family_types(schema)
    fam = keyword_families(schema)
    return frozenset(fam) if fam else frozenset(JSON_TYPES)


def _finite(schema: Any) -> list[Any] | None:
    if not isinstance(schema, dict):
        return [] if schema is False else None
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema and isinstance(schema["enum"], list):
        return list(schema["enum"])
    return None


def flat_facts(schema: dict[str, Any], *, generated: bool) -> Facts:
    """Facts of a flat, merged schema; ``generated`` describes the compiler's narrowed output."""
    types = _generated_types(schema) if generated else _family_types(schema)
    values = _finite(schema)
    if values is not None:
        types = types & frozenset(json_type(v) for v in values)
    props = schema.get("properties") or {}
    prop_values = {}
    for name, sub in props.items():
        fin = _finite(sub)
        if fin is not None:
            prop_values[name] = fin
    keys: frozenset[str] | None = None
    extra = schema.get("additionalProperties", None if not generated else False)
    if extra is False and "patternProperties" not in schema:
        keys = frozenset(props) | frozenset(schema.get("required") or [])
    return Facts(
        types=types,
        values=values,
        required=frozenset(schema.get("required") or []),
        prop_values=prop_values,
        keys=keys,
        absent=frozenset(name for name, sub in props.items() if sub is False),
    )


def union_facts(many: list[Facts]) -> Facts:
    """Facts of ``anyOf``/``oneOf`` of schemas with the given facts."""
    if not many:
        return Facts(types=frozenset())
    types = frozenset().union(*(f.types for f in many))
    values = None
    if all(f.values is not None for f in many):
        values = [v for f in many for v in f.values or []]
    required = frozenset.intersection(*(f.required for f in many))
    prop_values: dict[str, list[Any]] = {}
    for name in set.intersection(*(set(f.prop_values) for f in many)):
        prop_values[name] = [v for f in many for v in f.prop_values[name]]
    keys = None
    if all(f.keys is not None for f in many):
        keys = frozenset().union(*(f.keys or frozenset() for f in many))
    absent = frozenset.intersection(*(f.absent for f in many))
    return Facts(
        types=types,
        values=values,
        required=required,
        prop_values=prop_values,
        keys=keys,
        absent=absent,
    )


def excludes(gen: Facts, val: Facts, is_valid: Callable[[Any], bool]) -> bool:
    """True when provably no value described by ``gen`` is valid for the schema behind ``val``.

    ``is_valid`` validates a value against that schema (used when ``gen`` is a finite set).
    """
    if not gen.types & val.types:
        return True
    if gen.values is not None:
        return not any(is_valid(v) for v in gen.values)
    if val.values is not None and gen.types <= {"null", "boolean"}:
        return False
    if gen.types <= {"object"}:
        for name in gen.required:
            gv, vv = gen.prop_values.get(name), val.prop_values.get(name)
            if (
                gv is not None
                and vv is not None
                and not {canonical(v) for v in gv} & {canonical(v) for v in vv}
            ):
                return True
        if gen.keys is not None and not val.required <= gen.keys:
            return True
        if val.required & gen.absent:
            return True
    return False


def separating_part(gen: Facts, val: Facts) -> dict[str, Any] | None:
    """A schema to add to a ``oneOf`` branch (a narrowing) so that its values fail another.

    ``gen`` describes the branch's generated objects, ``val`` the other branch: make a
    discriminator with disjoint constant values required, or never write a key the other
    branch requires. None when neither applies.
    """
    if not gen.types <= {"object"}:
        return None
    for name, values in gen.prop_values.items():
        other = val.prop_values.get(name)
        if name in gen.required or other is None or not values:
            continue
        if not {canonical(v) for v in values} & {canonical(v) for v in other}:
            return {"required": [name]}
    keys = sorted(val.required - gen.required - gen.absent)
    return {"properties": {keys[0]: False}} if keys else None
