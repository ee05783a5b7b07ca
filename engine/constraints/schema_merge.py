"""Merge the flat parts of an ``allOf`` into one schema with the same meaning.

A *flat* part has no ``$ref``, ``allOf``, ``anyOf`` or ``oneOf`` (the compiler
expands those first). The merge is exact: bounds take the stricter value, types
intersect, each property's schema becomes the ``allOf`` of what every part says
about it — its own ``properties`` entry, or its ``additionalProperties`` when the
part does not declare the key. A keyword the merge cannot combine exactly (two
different ``pattern``s, say) raises :class:`SchemaError`.
"""

from __future__ import annotations

from typing import Any

from ..errors import SchemaError
from .schema_keywords import KNOWN_VALIDATION

#: Key of the merged schema holding the original parts (enum candidates are validated against them).
PARTS_KEY = "__agentflow_parts__"

_MAX = {"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"}
_MIN = {"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"}


def _types(part: dict[str, Any]) -> set[str] | None:
    t = part.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def _intersect_types(a: set[str] | None, b: set[str] | None) -> set[str] | None:
    if a is None:
        return b
    if b is None:
        return a
    out = a & b
    if ("integer" in a and "number" in b) or ("number" in a and "integer" in b):
        out.add("integer")
    return out


def _all_of(schemas: list[Any]) -> Any:
    kept = [s for s in schemas if s is not True and s != {}]
    if any(s is False for s in kept):
        return False
    if not kept:
        return True
    return kept[0] if len(kept) == 1 else {"allOf": kept}


def merge_flat(parts: list[dict[str, Any]], pointer: str) -> dict[str, Any]:
    """One schema equivalent to the conjunction of flat ``parts``."""
    if len(parts) == 1:
        return dict(parts[0])
    for part in parts:
        for key in ("unevaluatedProperties", "unevaluatedItems"):
            if key in part:
                # It sees only what its own schema object evaluated, not its cousins'.
                raise SchemaError(
                    f"{key} combined with other subschemas is not supported",
                    keyword=key,
                    pointer=pointer,
                )
    merged: dict[str, Any] = {PARTS_KEY: list(parts)}
    types: set[str] | None = None
    has_type = False
    for part in parts:
        if "type" in part:
            has_type = True
            types = _intersect_types(types, _types(part))
    if has_type:
        order = ["null", "boolean", "object", "array", "string", "number", "integer"]
        merged["type"] = [t for t in order if t in (types or set())]

    names: list[str] = []
    for part in parts:
        for name in part.get("properties", {}) or {}:
            if name not in names:
                names.append(name)
    if names:
        props: dict[str, Any] = {}
        for name in names:
            says = []
            for part in parts:
                declared = part.get("properties") or {}
                if name in declared:
                    says.append(declared[name])
                elif "additionalProperties" in part:
                    says.append(part["additionalProperties"])
            props[name] = _all_of(says)
        merged["properties"] = props
    extra = [p["additionalProperties"] for p in parts if "additionalProperties" in p]
    if extra:
        merged["additionalProperties"] = _all_of(extra)
    required: list[str] = []
    for part in parts:
        for name in part.get("required", []) or []:
            if name not in required:
                required.append(name)
    if required:
        merged["required"] = required

    _merge_arrays(parts, merged)

    for part in parts:
        for key, value in part.items():
            if key in (
                "type",
                "properties",
                "additionalProperties",
                "required",
                "items",
                "prefixItems",
                "additionalItems",
                "enum",
                "const",
            ):
                continue
            if key not in KNOWN_VALIDATION:
                continue  # annotations and unknown keywords constrain nothing
            if key == "not":
                merged["not"] = {"anyOf": [merged["not"], value]} if "not" in merged else value
                continue
            if key in _MAX or key in _MIN:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise SchemaError(f"{key} must be a number", keyword=key, pointer=pointer)
                if key not in merged:
                    merged[key] = value
                else:
                    merged[key] = (
                        max(merged[key], value) if key in _MAX else min(merged[key], value)
                    )
            elif key == "uniqueItems":
                merged[key] = bool(merged.get(key, False)) or bool(value)
            elif key in merged and merged[key] != value:
                raise SchemaError(
                    f"allOf combines two different values of {key!r}", keyword=key, pointer=pointer
                )
            else:
                merged[key] = value
    for part in parts:
        for key in ("const", "enum"):
            if key in part and "const" not in merged and "enum" not in merged:
                merged[key] = part[key]
    return merged


def _merge_arrays(parts: list[dict[str, Any]], merged: dict[str, Any]) -> None:
    prefix_len = max((len(p.get("prefixItems") or []) for p in parts), default=0)
    if prefix_len:
        prefix = []
        for i in range(prefix_len):
            says = []
            for part in parts:
                pre = part.get("prefixItems") or []
                if i < len(pre):
                    says.append(pre[i])
                elif "items" in part:
                    says.append(part["items"])
            prefix.append(_all_of(says))
        merged["prefixItems"] = prefix
    items = [p["items"] for p in parts if "items" in p]
    if items:
        merged["items"] = _all_of(items)
