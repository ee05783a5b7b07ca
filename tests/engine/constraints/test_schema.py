"""The schema front end: exact enforcement, refusals with pointers, limits."""

from __future__ import annotations

import json
import logging
from typing import Any

import jsonschema
import pytest
from outlines_core import Index, Vocabulary

from agentflow.engine.chat_template import compact_json
from agentflow.engine.constraints import OutputValidationError, compile_json_schema
from agentflow.engine.errors import SchemaError


def accepts(schema: Any, value: Any, **options: Any) -> bool:
    return compile_json_schema(schema, **options).matches(compact_json(value))


def is_valid(schema: Any, value: Any) -> bool:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value)


@pytest.mark.parametrize(
    ("schema", "values"),
    [
        ({"type": "integer", "minimum": -12, "maximum": 250}, range(-30, 300)),
        ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100}, range(-5, 105)),
        ({"type": "integer", "minimum": 2.5}, range(-3, 10)),
        ({"type": "integer", "maximum": 10**20}, [10**20 - 1, 10**20, 10**20 + 1, -(10**30)]),
    ],
)
def test_integer_bounds_are_exact(schema: dict[str, Any], values: Any) -> None:
    compiled = compile_json_schema(schema)
    for v in values:
        assert compiled.matches(str(v)) == is_valid(schema, v), v
    assert not compiled.matches("-0") or is_valid(schema, 0)
    assert not compiled.matches("007")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number", "exclusiveMinimum": 0.1, "maximum": 0.3},
        {"type": "number", "minimum": -1.5, "exclusiveMaximum": 2},
        {"type": "number", "exclusiveMaximum": 1},
    ],
)
def test_number_bounds_hold_for_the_parsed_float(schema: dict[str, Any]) -> None:
    compiled = compile_json_schema(schema)
    texts = ["0.1", "0.10000001", "0.3", "0.30000000000000004", "0.2", "-1.5", "-1.50", "-1.6"]
    texts += ["2", "1.999999", "0.99999999999999999999", "1", "0.999999", "1e0", "-0.0", "5"]
    for text in texts:
        if compiled.matches(text):
            assert is_valid(schema, json.loads(text)), text
    assert compiled.matches("0.2") == is_valid(schema, 0.2)


def test_string_lengths_count_code_points_and_escapes() -> None:
    compiled = compile_json_schema({"type": "string", "minLength": 2, "maxLength": 3})
    for s in ["ab", "abc", "é😀", 'a"b', "a\nb", "\\\\x"]:
        assert compiled.matches(compact_json(s)), s
    for s in ["a", "abcd", "😀", "éééé"]:
        assert not compiled.matches(compact_json(s)), s
    assert compiled.matches('"\\u00e9z"')
    assert not compiled.matches('"\\ud83d\\ude00"')  # surrogate escapes are never generated
    assert not compiled.matches('"a\nb"')  # raw control characters are not JSON


def test_objects_keep_order_required_and_closed_keys() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["b"],
    }
    compiled = compile_json_schema(schema)
    assert compiled.matches('{"b":"x"}')
    assert compiled.matches('{"a":1,"b":"x","c":true}')
    assert not compiled.matches('{"a":1}')
    assert not compiled.matches('{"b":"x","a":1}')  # declared order only
    assert not compiled.matches(
        '{"b":"x","d":1}'
    )  # no undeclared keys without additionalProperties
    assert not compiled.matches('{"b":"x","b":"y"}')


def test_additional_properties_never_reuse_declared_keys() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "additionalProperties": {"type": "string"},
    }
    compiled = compile_json_schema(schema)
    assert compiled.matches('{"id":1,"name":"x","idx":"y"}')
    assert compiled.matches('{"other":"x"}')
    assert not compiled.matches('{"id":1,"id":"x"}')
    assert not compiled.matches('{"name":1}')


def test_enum_and_const_are_filtered_by_the_other_keywords() -> None:
    schema = {"type": "integer", "enum": [1, "1", True, 2.0, {"a": [1]}, 7], "maximum": 5}
    compiled = compile_json_schema(schema)
    assert compiled.matches("1") and compiled.matches("2.0")
    for text in ['"1"', "true", '{"a":[1]}', "7"]:
        assert not compiled.matches(text), text
    assert accepts({"const": {"k": [1, "é"]}}, {"k": [1, "é"]})


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        ("^[a-z]+$", ["abc"], ["ab1", ""]),
        ("oo", ["foo", "oops"], ["fo"]),
        ("^\\d{3}-\\d{2}$", ["123-45"], ["123-456", "١٢٣-45"]),
        ('^[^"]*$', ["plain"], ['with"quote']),
        ("^a|b$", ["ax", "xb"], ["xa"]),
    ],
)
def test_pattern_is_a_search_with_anchors(pattern: str, good: list[str], bad: list[str]) -> None:
    compiled = compile_json_schema({"type": "string", "pattern": pattern})
    for s in good:
        assert compiled.matches(compact_json(s)), s
    for s in bad:
        assert not compiled.matches(compact_json(s)), s


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date", ["2024-02-29", "2023-12-31"], ["2023-02-29", "2023-13-01", "2023-04-31"]),
        ("date-time", ["2024-01-01T10:00:00Z", "2024-01-01T10:00:00.5+02:00"], ["2024-01-01"]),
        ("ipv4", ["10.0.0.255"], ["256.0.0.1", "01.2.3.4"]),
        ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567"]),
        ("email", ["ann.lee@example.com"], ["ann@", "@x.com"]),
    ],
)
def test_formats(fmt: str, good: list[str], bad: list[str]) -> None:
    schema = {"type": "string", "format": fmt}
    compiled = compile_json_schema(schema)
    for s in good:
        assert compiled.matches(compact_json(s)) and is_valid(schema, s), s
    for s in bad:
        assert not compiled.matches(compact_json(s)), s


def test_arrays_prefix_items_and_counts() -> None:
    schema = {
        "type": "array",
        "prefixItems": [{"type": "string"}, {"type": "integer"}],
        "items": {"type": "boolean"},
        "minItems": 1,
        "maxItems": 3,
    }
    compiled = compile_json_schema(schema)
    for value in (["a"], ["a", 1], ["a", 1, True]):
        assert compiled.matches(compact_json(value)), value
    for value in ([], [1], ["a", 1, True, False], ["a", "b"]):
        assert not compiled.matches(compact_json(value)), value


def test_one_of_needs_disjoint_branches() -> None:
    disjoint = {
        "oneOf": [
            {
                "type": "object",
                "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
                "required": ["kind"],
            },
            {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"]},
        ]
    }
    compiled = compile_json_schema(disjoint)
    assert compiled.matches('{"kind":"a","x":1}') and compiled.matches('{"kind":"b"}')
    overlapping = {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}
    with pytest.raises(SchemaError) as err:
        compile_json_schema(overlapping)
    assert err.value.keyword == "oneOf" and err.value.pointer == ""


def test_unsupported_keyword_names_keyword_and_pointer() -> None:
    schema = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
    with pytest.raises(SchemaError) as err:
        compile_json_schema(schema)
    assert err.value.keyword == "uniqueItems"
    assert err.value.pointer == "/properties/tags"
    assert "/properties/tags" in str(err.value)


def test_non_strict_drops_and_validates_after(caplog: pytest.LogCaptureFixture) -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    with caplog.at_level(logging.WARNING):
        compiled = compile_json_schema(schema, strict=False)
    assert not compiled.exact and compiled.dropped == ("/: uniqueItems",)
    assert "uniqueItems" in caplog.text
    assert compiled.matches("[1,1]")
    assert compiled.validate("[1,2]") == [1, 2]
    with pytest.raises(OutputValidationError):
        compiled.validate("[1,1]")


def test_all_of_merges_with_additional_properties_semantics() -> None:
    schema = {
        "allOf": [
            {
                "type": "object",
                "properties": {"a": {"type": "integer", "minimum": 0}},
                "additionalProperties": False,
            },
            {"properties": {"a": {"maximum": 5}, "b": {"type": "string"}}},
        ]
    }
    compiled = compile_json_schema(schema)
    assert compiled.matches('{"a":5}')
    assert not compiled.matches('{"a":6}')
    assert not compiled.matches('{"a":1,"b":"x"}')  # b is "additional" for the first part


def test_recursive_refs_are_unrolled_to_max_depth() -> None:
    schema = {
        "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
        "$ref": "#/$defs/node",
    }
    compiled = compile_json_schema(schema, max_depth=2)
    assert compiled.matches('{"next":{}}')
    assert not compiled.matches('{"next":{"next":{}}}')
    assert compile_json_schema(schema, max_depth=3).matches('{"next":{"next":{}}}')


def test_pretty_mode_allows_bounded_whitespace() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
    }
    pretty = compile_json_schema(schema, max_whitespace=4)
    assert pretty.matches('{\n  "a": [1, 2]\n}')
    assert pretty.matches('{"a":[1,2]}')
    assert not pretty.matches('{"a":' + " " * 5 + "[]}")
    assert not compile_json_schema(schema).matches('{"a": []}')


def test_time_limit_raises_schema_error() -> None:
    props = {f"p{i}": {"type": "string", "pattern": "^[a-z]{1,8}$"} for i in range(400)}
    with pytest.raises(SchemaError, match="time limit"):
        compile_json_schema({"type": "object", "properties": props}, time_limit=0.001)


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(SchemaError, match="must be an object or a boolean"):
        compile_json_schema([1, 2])  # type: ignore[arg-type]
    with pytest.raises(SchemaError) as err:
        compile_json_schema({"$ref": "https://example.com/s.json"})
    assert err.value.keyword == "$ref"
    with pytest.raises(SchemaError, match="unsatisfiable"):
        compile_json_schema({"type": "integer", "minimum": 5, "maximum": 1})


@pytest.mark.parametrize(
    "schema",
    [
        {
            "type": "object",
            "properties": {"n": {"type": "number", "minimum": -2.5, "maximum": 1000}},
        },
        {"type": "string", "format": "date-time"},
        {"type": "string", "pattern": "^[^@\\s]+@[a-z]+\\.(com|org)$"},
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {
            "type": "array",
            "items": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 3}]},
        },
    ],
)
def test_regex_is_accepted_by_outlines(schema: dict[str, Any]) -> None:
    compiled = compile_json_schema(schema)
    vocab = {bytes([b]): [b] for b in range(256)}
    index = Index(compiled.regex, Vocabulary(256, vocab))
    assert index.get_initial_state() is not None
