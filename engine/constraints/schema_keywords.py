"""The JSON Schema keywords the compiler knows, grouped by the values they constrain."""

from __future__ import annotations

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
