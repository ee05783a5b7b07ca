"""The front end's size-saving and narrowing steps: ordered members, nesting depth,
separated ``oneOf`` branches, patterns fitted to length bounds. Each is checked for
soundness (every match validates) and for what it still accepts."""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

import jsonschema
import pytest
from outlines_core import Index, Vocabulary

from agentflow.engine.chat_template import compact_json
from agentflow.engine.constraints import compile_json_schema
from agentflow.engine.constraints.object_members import ordered_members
from agentflow.engine.constraints.regex_text import MAX_SYNTAX_DEPTH, syntax_depth
from agentflow.engine.errors import SchemaError


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_ordered_members_is_exact(n: int) -> None:
    rnd = random.Random(n)
    names = "abcdefg"[:n]
    for _ in range(6):
        required = {c for c in names if rnd.random() < 0.3}
        regex = ordered_members([(c, c in required) for c in names], ",")
        assert regex is not None
        pattern = re.compile(regex)
        for k in range(n + 1):
            for chosen in itertools.combinations(names, k):
                text = ",".join(chosen)
                expected = bool(chosen) and required <= set(chosen)
                assert (pattern.fullmatch(text) is not None) == expected, (required, text)
                if k >= 2:  # out of declaration order: never
                    assert pattern.fullmatch(",".join(reversed(chosen))) is None


def test_ordered_members_size_and_depth_stay_small() -> None:
    entries = [(f"m{i:03d}", False) for i in range(256)]
    regex = ordered_members(entries, ",")
    assert regex is not None
    body = sum(len(e) for e, _ in entries)
    assert len(regex) < 12 * body  # O(n log n), not quadratic
    assert syntax_depth(regex) < 60


def _index_accepts(regex: str) -> bool:
    vocab = Vocabulary(3, {bytes([c]): [c] for c in range(48, 123)})
    try:
        Index(regex, vocab)
    except Exception:  # outlines-core reports the regex-syntax nest limit as a build error
        return False
    return True


@pytest.mark.parametrize(
    "make",
    [
        lambda d: "(?:" * d + "a" + ")" * d,
        lambda d: "(?:b" * d + "a" + ")" * d,
        lambda d: "(?:bc|c" * d + "a" + ")" * d,
        lambda d: "(?:" * d + "a" + ")?" * d,
        lambda d: "(?:" * d + "[ab]" + ")" * d,
    ],
)
def test_syntax_depth_never_underestimates_outlines_nest_limit(make: Any) -> None:
    for d in range(70, 260, 9):
        regex = make(d)
        if syntax_depth(regex) <= MAX_SYNTAX_DEPTH:
            assert _index_accepts(regex), d


def test_too_deep_schema_is_refused_before_indexing() -> None:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(80):
        schema = {"type": "object", "properties": {"a": schema, "b": {"type": "string"}}}
    with pytest.raises(SchemaError, match="nests deeper"):
        compile_json_schema(schema)


def _check_sound(schema: dict[str, Any], samples: list[Any]) -> int:
    compiled = compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    accepted = 0
    for value in samples:
        if compiled.matches(compact_json(value)):
            assert validator.is_valid(value), value
            accepted += 1
    return accepted


def _objects(keys: list[str], rnd: random.Random, count: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(count):
        chosen = [k for k in keys if rnd.random() < 0.5]
        out.append({k: rnd.choice([1, 2.5, "x", "circle", "square"]) for k in chosen})
    return out


def test_one_of_required_keys_is_separated() -> None:
    schema = {
        "type": "object",
        "properties": {k: {"type": "number"} for k in ("radius", "length", "width", "height")},
        "oneOf": [{"required": ["radius"]}, {"required": ["length", "width"]}],
    }
    compiled = compile_json_schema(schema)
    assert compiled.matches('{"radius":1}')
    assert compiled.matches('{"length":1,"width":2}')
    assert not compiled.matches('{"radius":1,"length":1,"width":2}')
    rnd = random.Random(0)
    assert _check_sound(schema, _objects(["radius", "length", "width", "height"], rnd, 400)) > 0


def test_one_of_branch_that_cannot_be_separated_is_dropped() -> None:
    schema = {
        "type": "object",
        "properties": {"radius": {"type": "number"}, "height": {"type": "number"}},
        "oneOf": [{"required": ["radius"]}, {"required": ["radius", "height"]}],
    }
    compiled = compile_json_schema(schema)
    assert compiled.matches('{"radius":1}')
    assert not compiled.matches('{"radius":1,"height":2}')
    _check_sound(schema, _objects(["radius", "height"], random.Random(1), 200))


def test_one_of_discriminator_is_made_required() -> None:
    schema = {
        "type": "object",
        "oneOf": [
            {"properties": {"shape": {"enum": ["circle"]}, "radius": {"type": "number"}}},
            {"properties": {"shape": {"enum": ["square"]}, "side": {"type": "number"}}},
        ],
    }
    compiled = compile_json_schema(schema)
    assert compiled.matches('{"shape":"circle","radius":2}')
    assert not compiled.matches("{}")
    _check_sound(schema, _objects(["shape", "radius", "side"], random.Random(2), 400))


def test_overlapping_one_of_without_separation_is_still_refused() -> None:
    with pytest.raises(SchemaError):
        compile_json_schema({"oneOf": [{"type": "integer"}, {"type": "number"}]})


def _strings(rnd: random.Random) -> list[str]:
    out = []
    for alphabet in ("abcdz019:.-_ é", "0123-", "ab"):
        for _ in range(3000):
            out.append("".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 9))))
    return out


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "[a-zA-Z0-9_.-]+", "minLength": 3, "maxLength": 255},
        {"type": "string", "pattern": "^([a-z0-9-]+):([a-z0-9.-]+)$", "maxLength": 9},
        {"type": "string", "pattern": "^[\\w]+$", "minLength": 3, "maxLength": 5},
        {"type": "string", "pattern": "^[0-9]{2,5}-?[0-9]{1,4}$", "minLength": 6, "maxLength": 7},
        {"type": "string", "pattern": "ab", "minLength": 4, "maxLength": 5},
        {"type": "string", "pattern": "^(a|bcd)+$", "maxLength": 4},
    ],
)
def test_pattern_fitted_to_length_bounds_is_sound(schema: dict[str, Any]) -> None:
    compiled = compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    accepted = [s for s in _strings(random.Random(3)) if compiled.matches(compact_json(s))]
    assert all(validator.is_valid(s) for s in accepted)
    assert accepted, "the narrowed pattern should still accept some strings"


def test_pattern_that_cannot_fit_its_lengths_is_empty_or_refused() -> None:
    with pytest.raises(SchemaError):
        compile_json_schema({"type": "string", "pattern": "^a{5}$", "maxLength": 3})


def _arrays(values: list[Any], longest: int) -> list[list[Any]]:
    return [list(c) for n in range(longest + 1) for c in itertools.product(values, repeat=n)]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "items": {"enum": ["a", "b", 1, 1.0]}, "uniqueItems": True},
        {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 2},
        {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True, "maxItems": 2},
    ],
)
def test_unique_items_of_a_finite_set(schema: dict[str, Any]) -> None:
    samples = _arrays(["a", "b", "c", 1, True, False, None], 3)
    assert _check_sound(schema, samples) > 0


def test_unique_items_of_an_infinite_set_is_refused() -> None:
    with pytest.raises(SchemaError, match="uniqueItems"):
        compile_json_schema({"type": "array", "items": {"type": "string"}, "uniqueItems": True})


def test_min_and_max_properties_narrow_the_declared_members() -> None:
    props = {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}}
    rnd = random.Random(4)
    samples = [
        {k: v for k, v in (("a", 1), ("b", "x"), ("c", None)) if rnd.random() < 0.6}
        for _ in range(200)
    ]
    for lo, hi in ((2, None), (None, 1), (1, 2), (3, 3)):
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if lo is not None:
            schema["minProperties"] = lo
        if hi is not None:
            schema["maxProperties"] = hi
        assert _check_sound(schema, samples) > 0, (lo, hi)
    with pytest.raises(SchemaError, match="minProperties"):
        compile_json_schema({"type": "object", "properties": props, "minProperties": 4})


def test_recursion_is_unrolled_less_when_the_regex_would_be_too_large() -> None:
    node = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "left": {"$ref": "#"},
            "right": {"$ref": "#"},
            "kids": {"type": "array", "items": {"$ref": "#"}},
        },
    }
    full = compile_json_schema(node)
    small = compile_json_schema(node, max_regex_chars=len(full.regex) // 3)
    assert len(small.regex) <= len(full.regex) // 3
    assert small.matches('{"name":"a","left":{"name":"b"}}')
    assert full.matches('{"left":{"left":{"name":"c"}}}')
    with pytest.raises(SchemaError, match="exceeds"):
        compile_json_schema({"type": "array", "items": {"type": "string"}}, max_regex_chars=10)


@pytest.mark.parametrize(
    ("fmt", "max_length", "fits", "too_long"),
    [
        ("email", 254, "abc@example.com", None),
        ("email", 10, "a@b.co", "abc@example.com"),
        ("ipv4", 8, "1.2.3.4", "10.20.30.40"),
        ("hostname", 12, "abc.de", "a.example.com"),
    ],
)
def test_format_fitted_to_max_length(
    fmt: str, max_length: int, fits: str, too_long: str | None
) -> None:
    schema = {"type": "string", "format": fmt, "maxLength": max_length}
    compiled = compile_json_schema(schema)
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    validator = jsonschema.Draft202012Validator(schema, format_checker=checker)
    assert compiled.matches(compact_json(fits))
    if too_long is not None:
        assert not compiled.matches(compact_json(too_long))
    for text in [*_strings(random.Random(5)), "a@b", "a..b@c.d", "1.2.3", "-a.com", "a" * 13]:
        if compiled.matches(compact_json(text)):
            assert validator.is_valid(text), text
