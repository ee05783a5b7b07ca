"""The JSON Schema keywords the compiler knows, grouped by the values they constrain,
and the small readers every part of the compiler shares (sub-schema pointers, counts, types)."""

from __future__ import annotations

from typing import Any

from ..errors import SchemaError
from .string_formats import NUMERIC_FORMAT_RANGES

OBJECT_KEYWORDS = frozenset(
    {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "unevaluatedProperties",
    }
)
ARRAY_KEYWORDS = frozenset(
    {
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
    }
)
STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern"})
NUMBER_KEYWORDS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "divisibleBy"}
)
#: Keywords with no effect on validity (annotations, identifiers, containers).
ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "example",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$schema",
        "$id",
        "id",
        "$anchor",
        "$dynamicAnchor",
        "$recursiveAnchor",
        "$vocabulary",
        "$defs",
        "definitions",
        "discriminator",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "nullable",
        "xml",
        "externalDocs",
    }
)
#: Validation keywords (of any draft) that constrain every type and are not enforced.
REFUSED_GENERAL = frozenset({"not", "if", "$dynamicRef", "$recursiveRef", "disallow", "extends"})
#: Keywords the compiler expands before it merges a schema's flat parts.
STRUCTURAL = frozenset({"$ref", "allOf", "anyOf", "oneOf"})
JSON_TYPES = ("null", "boolean", "object", "array", "string", "number")

#: Every keyword that can make a value invalid (in any draft); others are ignored.
KNOWN_VALIDATION = (
    OBJECT_KEYWORDS
    | ARRAY_KEYWORDS
    | STRING_KEYWORDS
    | NUMBER_KEYWORDS
    | REFUSED_GENERAL
    | frozenset({"type", "enum", "const", "format", "then", "else"})
)


def child_pointer(pointer: str, *parts: str | int) -> str:
    """The JSON pointer of a sub-schema: ``pointer`` extended by ``parts`` (escaped)."""
    out = pointer
    for p in parts:
        out += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return out


def count_keyword(schema: dict[str, Any], key: str, pointer: str) -> int | None:
    """The non-negative integer value of ``key`` in ``schema`` (None when absent)."""
    if key not in schema:
        return None
    v = schema[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v):
        raise SchemaError(f"{key} must be a non-negative integer", keyword=key, pointer=pointer)
    return int(v)


def keyword_families(schema: dict[str, Any]) -> list[str]:
    """The JSON types whose keywords an untyped schema uses (object, array, string, number)."""
    keys = set(schema)
    families = (
        ("object", OBJECT_KEYWORDS),
        ("array", ARRAY_KEYWORDS),
        ("string", STRING_KEYWORDS),
        ("number", NUMBER_KEYWORDS),
    )
    return [name for name, keywords in families if keys & keywords]


def schema_types(schema: dict[str, Any], pointer: str) -> list[str]:
    """The JSON types a flat schema admits: its ``type``, else the families of its keywords."""
    if "type" in schema:
        t = schema["type"]
        names = [t] if isinstance(t, str) else t
        if not isinstance(names, list) or any(n not in (*JSON_TYPES, "integer") for n in names):
            raise SchemaError(f"unknown type {t!r}", keyword="type", pointer=pointer)
        if "number" in names:
            names = [n for n in names if n != "integer"]
        return list(dict.fromkeys(names))
    fam = keyword_families(schema)
    if "format" in schema and not fam:
        fmt = schema["format"]
        fam.append(
            "integer"
            if fmt in ("int32", "int64")
            else "number"
            if fmt in NUMERIC_FORMAT_RANGES
            else "string"
        )
    return fam or ["null", "boolean", "object", "array", "string", "number"]
