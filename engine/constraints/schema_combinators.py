"""``oneOf`` separation and ``not``: the combinators that need more than a union.

``anyOf`` compiles to the union of its branches (the compiler does that itself).
A ``oneOf`` branch must also fail every other branch, so :func:`separate` narrows
each overlapping branch with a separating part, and drops the ones it cannot
separate. :func:`negate` applies the shapes of ``not`` that have an exact form.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import SchemaError
from .json_values import json_type
from .schema_facts import Facts, excludes, flat_facts, separating_part, union_facts
from .schema_keywords import KNOWN_VALIDATION, STRUCTURAL, child_pointer
from .schema_merge import merge_flat

if TYPE_CHECKING:
    from .schema_compiler import Combo, Compiler, Expanded


def separate(
    c: Compiler,
    combo: Combo,
    flat: list[tuple[dict[str, Any], str]],
    others: list[Combo],
    refs: tuple[str, ...],
    pointer: str,
    expansions: list[Expanded | None],
    results: list[str | None],
) -> list[str | None]:
    """The branches of a ``oneOf``, each narrowed so that its values fail every other branch.

    A branch that overlaps another gets a separating part (a required discriminator, or
    a key the other branch requires never written); one that cannot be separated is not
    generated. Refuses when no branch is left.
    """
    val = [
        _facts(c, flat + e.flat, e.combos, generated=False) if e is not None else None
        for e in expansions
    ]
    out = list(results)
    for i, e in enumerate(expansions):
        if e is None or out[i] is None:
            continue
        extra: list[tuple[dict[str, Any], str]] = []
        while True:
            gen = _facts(c, flat + e.flat + extra, e.combos, generated=True)
            blocker = next(
                (
                    j
                    for j, (branch, _) in enumerate(combo.branches)
                    if j != i
                    and val[j] is not None
                    and not excludes(gen, val[j], lambda v, b=branch: c.is_valid(v, b))
                ),
                None,
            )
            if blocker is None:
                break
            part = separating_part(gen, val[blocker])  # type: ignore[arg-type]
            if part is None or len(extra) >= len(combo.branches):
                out[i] = None
                break
            extra.append((part, combo.branches[i][1]))
        if extra and out[i] is not None:
            out[i] = c.compile_parts(
                flat + e.flat + extra, others + e.combos, max(refs, e.refs, key=len), pointer
            )
    if all(r is None for r in out) and any(r is not None for r in results):
        c.refuse("oneOf", combo.pointer, "no branch can be proven disjoint from the others")
        return results
    return out


def _facts(
    c: Compiler, flat: list[tuple[dict[str, Any], str]], combos: list[Combo], *, generated: bool
) -> Facts:
    """Facts of parts and pending combinators; ``generated`` describes the narrowed output."""
    merged = merge_flat([p for p, _ in flat], "") if flat else {}
    base = flat_facts(merged, generated=generated)
    for combo in combos:
        alts = []
        for branch, bptr in combo.branches:
            sub = c.expand(branch, bptr, combo.refs)
            if sub is not None:
                alts.append(_facts(c, sub.flat, sub.combos, generated=generated))
        other = union_facts(alts)
        base = Facts(
            types=base.types & other.types,
            values=base.values if base.values is not None else other.values,
            required=base.required | other.required,
            prop_values={**other.prop_values, **base.prop_values},
            keys=base.keys if base.keys is not None else other.keys,
            absent=base.absent | other.absent,
        )
    return base


def negate(
    c: Compiler, neg: Any, schema: dict[str, Any], types: list[str], pointer: str
) -> tuple[dict[str, Any], list[str]] | None:
    """Apply ``not: neg`` for the shapes that have an exact form; refuse the rest."""
    if neg is False:
        return schema, types
    if neg is True:
        return None
    if not isinstance(neg, dict):
        raise SchemaError("not must be a schema", keyword="not", pointer=pointer)
    keys = {k for k in neg if k in KNOWN_VALIDATION or k in STRUCTURAL}
    if not keys:
        return None  # not {} rejects everything
    schema = dict(schema)
    if keys == {"anyOf"} and isinstance(neg["anyOf"], list):
        for i, branch in enumerate(neg["anyOf"]):
            done = negate(c, branch, schema, types, child_pointer(pointer, "anyOf", i))
            if done is None:
                return None
            schema, types = done
        return schema, types
    if keys == {"type"}:
        t = neg["type"]
        gone = {t} if isinstance(t, str) else set(t)
        if "number" in gone:
            gone.add("integer")
        if "integer" in gone and "number" in types:
            c.refuse("not", pointer, "excluding integers from numbers")
            return schema, types
        return schema, [x for x in types if x not in gone]
    together = _required_sets(neg)
    if together is not None:
        # "not all of these keys": never write one of them (a narrowing when several).
        absent = [k for k in together if k not in (schema.get("required") or [])]
        if not absent:
            return None
        props = dict(schema.get("properties") or {})
        props[absent[-1]] = False
        schema["properties"] = props
        return schema, [x for x in types if x == "object"]
    if keys <= {"enum", "const"}:
        values = [neg["const"]] if "const" in neg else list(neg.get("enum") or [])
        hit = {json_type(v) for v in values}
        emitted = {"number" if t == "integer" else t for t in types}
        if not hit & emitted:
            return schema, types
        plain = not ({"pattern", "format", "minLength", "maxLength"} & set(schema))
        if hit == {"string"} and plain:
            schema["__not_strings__"] = [v for v in values if isinstance(v, str)]
            return schema, types
    c.refuse("not", pointer, "only not {}, type, a single required key or string values")
    return schema, types


def _required_sets(neg: dict[str, Any]) -> list[str] | None:
    """Keys of ``{"required": [...]}`` or an ``allOf`` of such schemas (else None)."""
    keys = {k for k in neg if k in KNOWN_VALIDATION or k in STRUCTURAL}
    if keys == {"required"} and isinstance(neg["required"], list) and neg["required"]:
        return [str(k) for k in neg["required"]]
    if keys == {"allOf"} and isinstance(neg["allOf"], list):
        out: list[str] = []
        for sub in neg["allOf"]:
            got = _required_sets(sub) if isinstance(sub, dict) else None
            if got is None:
                return None
            out.extend(k for k in got if k not in out)
        return out or None
    return None
