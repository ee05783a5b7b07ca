"""JSON Schema → regex, exactly: the front end of the constraint engine.

:func:`compile_json_schema` turns a schema into a regex over compact JSON text
whose language is a subset of the schema's valid instances — never a superset.
Where a schema asks for something the compiler cannot enforce exactly, it raises
:class:`~agentflow.engine.errors.SchemaError` naming the keyword and its JSON
pointer (``strict=False`` drops the keyword with a warning instead, and the
output must then be checked with :meth:`CompiledSchema.validate`).

Deliberate narrowings (the output is still always valid): properties appear in
the order the schema lists them; an object without ``additionalProperties``
gets no undeclared keys; numbers with bounds have no exponent and at most six
fraction digits; strings use only the escapes JSON requires; recursion through
``$ref`` is unrolled ``max_depth`` times. See ``docs/constraints.md``.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jsonschema
from referencing import Registry
from referencing.exceptions import NoSuchResource

from ..errors import EngineError, SchemaError
from .ecma_pattern import PatternError, encoded_unit, translate_pattern
from .json_values import canonical, json_type
from .numeric_ranges import Bound, any_number, integer_range, number_range
from .object_members import ordered_members
from .regex_text import MAX_SYNTAX_DEPTH, alt, literal, optional, repeat, seq, syntax_depth
from .schema_facts import Facts, excludes, flat_facts, separating_part, union_facts
from .schema_keywords import (
    ARRAY_KEYWORDS,
    JSON_TYPES,
    KNOWN_VALIDATION,
    NUMBER_KEYWORDS,
    OBJECT_KEYWORDS,
    REFUSED_GENERAL,
    STRING_KEYWORDS,
)
from .schema_merge import PARTS_KEY, merge_flat
from .string_formats import NUMERIC_FORMAT_RANGES, REFUSED_FORMATS, string_format

logger = logging.getLogger(__name__)

_STRUCTURAL = {"$ref", "allOf", "anyOf", "oneOf"}
_QUOTE = "\\x22"
#: Any single character of a JSON string's content, escapes included (never a lone surrogate).
#: (The raw class already excludes ``"`` and ``\\``; their escapes are in the escape branch.)
_ANY_UNIT = (
    "(?:[^\\x00-\\x1f\\x22\\x5c]|\\x5c(?:[\\x22\\x5c\\x2fbfnrt]"
    "|u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})))"
)
#: Characters of an undeclared key: no escapes, so the key's text is its decoded value.
_KEY_CHAR_RANGES = [(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)]


#: Default cap on the regex size. outlines-core's index needs seconds and hundreds of MB
#: around 100-200k characters (2k-token vocabulary) and did not finish on a 300k one.
DEFAULT_MAX_REGEX_CHARS = 100_000


class OutputValidationError(EngineError):
    """Generated text is not valid JSON for the schema (only possible with ``strict=False``)."""


def _no_remote(uri: str) -> Any:
    raise NoSuchResource(ref=uri)


def offline_validator(schema: Any) -> Any:
    """A format-asserting validator for ``schema`` that never fetches remote references."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER, registry=Registry(retrieve=_no_remote))


@dataclass(frozen=True)
class CompiledSchema:
    """A JSON Schema compiled to a regex over JSON text."""

    schema: Any
    regex: str
    #: True when every keyword was enforced (the regex alone guarantees validity).
    exact: bool
    #: ``"<pointer>: <keyword>"`` for each keyword dropped under ``strict=False``.
    dropped: tuple[str, ...] = ()
    compile_seconds: float = 0.0
    max_whitespace: int = 0
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        return re.compile(self.regex)

    def matches(self, text: str) -> bool:
        """Whether ``text`` (the whole of it) is in the regex's language."""
        return self._pattern.fullmatch(text) is not None

    def validate(self, text: str) -> Any:
        """Parse ``text`` and validate it against the schema; return the value.

        Raises :class:`OutputValidationError` naming the first problem.
        """
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OutputValidationError(f"output is not JSON: {exc}") from exc
        error = jsonschema.exceptions.best_match(offline_validator(self.schema).iter_errors(value))
        if error is not None:
            where = "/" + "/".join(str(p) for p in error.absolute_path)
            raise OutputValidationError(
                f"output does not match the schema at {where}: {error.message}"
            )
        return value


def compile_json_schema(
    schema: Any,
    *,
    strict: bool = True,
    max_whitespace: int = 0,
    max_depth: int = 3,
    any_depth: int = 1,
    time_limit: float = 2.0,
    max_regex_chars: int = DEFAULT_MAX_REGEX_CHARS,
) -> CompiledSchema:
    """Compile ``schema`` (a dict or bool) to a :class:`CompiledSchema`.

    ``max_whitespace`` 0 is compact JSON; n > 0 allows up to n spaces/newlines/tabs
    at each structural gap (a bounded pretty mode). ``max_depth`` bounds how often
    one ``$ref`` may recurse (fewer levels when the regex would exceed ``max_regex_chars``);
    ``any_depth`` the nesting of unconstrained values.
    Raises :class:`SchemaError` for what cannot be enforced, for an unsatisfiable
    schema, and when compilation exceeds ``time_limit`` seconds or the regex
    ``max_regex_chars`` characters.
    """
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}")
    start = time.perf_counter()
    depth = max_depth
    while True:
        compiler = _Compiler(
            root=schema,
            strict=strict,
            deadline=start + time_limit,
            time_limit=time_limit,
            max_depth=depth,
            any_depth=any_depth,
            ws=f"[\\x20\\x0a\\x09]{{0,{max_whitespace}}}" if max_whitespace > 0 else "",
            max_regex_chars=max_regex_chars,
        )
        try:
            regex = compiler.compile(schema, "", ())
            if regex is not None and len(regex) > max_regex_chars:
                raise _RegexTooLarge(
                    f"compiled regex exceeds {max_regex_chars} characters", pointer=""
                )
            break
        except _RegexTooLarge:
            # Recursive schemas: unroll fewer levels before giving up on the size.
            if not compiler.recursive or depth <= 1:
                raise
            depth -= 1
        except RecursionError as exc:
            raise SchemaError("schema nests too deeply to compile", pointer="") from exc
    if regex is None:
        raise SchemaError("schema is unsatisfiable (no JSON value can be valid)", pointer="")
    if syntax_depth(regex) > MAX_SYNTAX_DEPTH:
        # outlines-core's regex parser would refuse it; say so before it is indexed.
        raise SchemaError(
            f"compiled regex nests deeper than {MAX_SYNTAX_DEPTH} levels (schema too deep)",
            pointer="",
        )
    return CompiledSchema(
        schema=schema,
        regex=regex,
        exact=not compiler.dropped,
        dropped=tuple(compiler.dropped),
        compile_seconds=time.perf_counter() - start,
        max_whitespace=max_whitespace,
    )


class _RegexTooLarge(SchemaError):
    """The regex outgrew ``max_regex_chars`` (recursive schemas retry with less unrolling)."""


@dataclass
class _Combo:
    kind: str  # "anyOf" | "oneOf"
    branches: list[tuple[Any, str]]
    refs: tuple[str, ...]
    pointer: str


@dataclass
class _Expanded:
    flat: list[tuple[dict[str, Any], str]]
    combos: list[_Combo]
    refs: tuple[str, ...]


def _child(pointer: str, *parts: str | int) -> str:
    out = pointer
    for p in parts:
        out += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return out


@dataclass
class _Compiler:
    root: Any
    strict: bool
    deadline: float
    time_limit: float
    max_depth: int
    any_depth: int
    ws: str
    max_regex_chars: int
    dropped: list[str] = field(default_factory=list)
    _any_cache: dict[int, str] = field(default_factory=dict)
    #: Whether some ``$ref`` was entered again inside itself (recursion was unrolled).
    recursive: bool = False

    # -- helpers -------------------------------------------------------------

    def _tick(self, pointer: str) -> None:
        if time.perf_counter() > self.deadline:
            raise SchemaError(
                f"compilation exceeded the time limit of {self.time_limit:g} s", pointer=pointer
            )

    def refuse(self, keyword: str, pointer: str, why: str) -> None:
        """Raise SchemaError (strict) or record the keyword as dropped."""
        if self.strict:
            raise SchemaError(
                f"{keyword!r} cannot be enforced exactly: {why}", keyword=keyword, pointer=pointer
            )
        where = _child(pointer, keyword)
        logger.warning(
            "dropping %s (%s); the output will be validated after generation", where, why
        )
        self.dropped.append(f"{pointer or '/'}: {keyword}")

    @cached_property
    def _validator(self) -> Any:
        return offline_validator(self.root)

    def is_valid(self, value: Any, schema: Any) -> bool:
        """``value`` validates against the sub-schema ``schema`` (``$ref`` resolved in the root)."""
        try:
            return bool(self._validator.evolve(schema=schema).is_valid(value))
        except (jsonschema.exceptions.SchemaError, jsonschema.exceptions.RefResolutionError) as exc:
            raise SchemaError(f"schema is invalid: {exc}") from exc
        except Exception as exc:  # referencing raises its own Unresolvable errors
            raise SchemaError(f"cannot validate against the schema: {exc}") from exc

    def resolve(self, ref: str, pointer: str) -> tuple[Any, str]:
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", keyword="$ref", pointer=pointer)
        if ref == "#" or ref == "":
            return self.root, ""
        if not ref.startswith("#/"):
            raise SchemaError(
                f"only local JSON-pointer references are supported, not {ref!r}",
                keyword="$ref",
                pointer=pointer,
            )
        node: Any = self.root
        path = ""
        for raw in ref[2:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SchemaError(f"$ref {ref!r} does not resolve", keyword="$ref", pointer=pointer)
            path = _child(path, part)
        return node, path

    # -- expansion of $ref / allOf / anyOf / oneOf ---------------------------

    def expand(self, schema: Any, pointer: str, refs: tuple[str, ...]) -> _Expanded | None:
        """Flat parts and pending combinators of ``schema``; None when it accepts nothing."""
        self._tick(pointer)
        out = _Expanded([], [], refs)
        if schema is True:
            return out
        if schema is False:
            return None
        if not isinstance(schema, dict):
            raise SchemaError(
                f"a schema must be an object or a boolean, not {type(schema).__name__}",
                pointer=pointer,
            )
        if "$ref" in schema:
            ref = schema["$ref"]
            target, tptr = self.resolve(ref, pointer)
            if ref in refs:
                self.recursive = True
            if refs.count(ref) >= self.max_depth:
                return None  # recursion unrolled to max_depth: deeper values are not generated
            sub = self.expand(target, tptr, (*refs, ref))
            if sub is None:
                return None
            out.flat.extend(sub.flat)
            out.combos.extend(sub.combos)
            out.refs = max(out.refs, sub.refs, key=len)
        if "allOf" in schema:
            subs = schema["allOf"]
            if not isinstance(subs, list) or not subs:
                raise SchemaError(
                    "allOf must be a non-empty array", keyword="allOf", pointer=pointer
                )
            for i, s in enumerate(subs):
                sub = self.expand(s, _child(pointer, "allOf", i), refs)
                if sub is None:
                    return None
                out.flat.extend(sub.flat)
                out.combos.extend(sub.combos)
                out.refs = max(out.refs, sub.refs, key=len)
        for kind in ("anyOf", "oneOf"):
            if kind in schema:
                subs = schema[kind]
                if not isinstance(subs, list) or not subs:
                    raise SchemaError(
                        f"{kind} must be a non-empty array", keyword=kind, pointer=pointer
                    )
                branches = [(s, _child(pointer, kind, i)) for i, s in enumerate(subs)]
                out.combos.append(_Combo(kind, branches, refs, pointer))
        rest = {k: v for k, v in schema.items() if k not in _STRUCTURAL}
        if rest or not (out.flat or out.combos):
            out.flat.append((self.normalize(rest, pointer), pointer))
        return out

    def normalize(self, part: dict[str, Any], pointer: str) -> dict[str, Any]:
        """Rewrite older-draft spellings into 2020-12 ones (tuple ``items``)."""
        part = dict(part)
        if isinstance(part.get("items"), list):
            part["prefixItems"] = part.pop("items")
            if "additionalItems" in part:
                part["items"] = part.pop("additionalItems")
        else:
            part.pop("additionalItems", None)
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            if isinstance(part.get(key), bool):
                raise SchemaError(
                    f"boolean {key} (draft 4) is not supported; use a number",
                    keyword=key,
                    pointer=pointer,
                )
        return part

    # -- compile ---------------------------------------------------------------

    def compile(self, schema: Any, pointer: str, refs: tuple[str, ...]) -> str | None:
        """Regex of ``schema``'s narrowed language (None: empty)."""
        expanded = self.expand(schema, pointer, refs)
        if expanded is None:
            return None
        return self._compile_parts(expanded.flat, expanded.combos, expanded.refs, pointer)

    def _compile_parts(
        self,
        flat: list[tuple[dict[str, Any], str]],
        combos: list[_Combo],
        refs: tuple[str, ...],
        pointer: str,
    ) -> str | None:
        self._tick(pointer)
        if not combos:
            parts = [p for p, _ in flat]
            where = flat[0][1] if len(flat) == 1 else pointer
            merged = merge_flat(parts, where) if parts else {}
            return self.compile_flat(merged, where, refs)
        combo, others = combos[0], combos[1:]
        results: list[str | None] = []
        expansions: list[_Expanded | None] = []
        for branch, bptr in combo.branches:
            sub = self.expand(branch, bptr, combo.refs)
            expansions.append(sub)
            if sub is None:
                results.append(None)
                continue
            results.append(
                self._compile_parts(
                    flat + sub.flat, others + sub.combos, max(refs, sub.refs, key=len), pointer
                )
            )
        if combo.kind == "oneOf" and len(combo.branches) > 1:
            results = self._separate(combo, flat, others, refs, pointer, expansions, results)
        return alt(results)

    def _separate(
        self,
        combo: _Combo,
        flat: list[tuple[dict[str, Any], str]],
        others: list[_Combo],
        refs: tuple[str, ...],
        pointer: str,
        expansions: list[_Expanded | None],
        results: list[str | None],
    ) -> list[str | None]:
        """The branches of a ``oneOf``, each narrowed so that its values fail every other branch.

        A branch that overlaps another gets a separating part (a required discriminator, or
        a key the other branch requires never written); one that cannot be separated is not
        generated. Refuses when no branch is left.
        """
        val = [
            self._facts(flat + e.flat, e.combos, generated=False) if e is not None else None
            for e in expansions
        ]
        out = list(results)
        for i, e in enumerate(expansions):
            if e is None or out[i] is None:
                continue
            extra: list[tuple[dict[str, Any], str]] = []
            while True:
                gen = self._facts(flat + e.flat + extra, e.combos, generated=True)
                blocker = next(
                    (
                        j
                        for j, (branch, _) in enumerate(combo.branches)
                        if j != i
                        and val[j] is not None
                        and not excludes(gen, val[j], lambda v, b=branch: self.is_valid(v, b))
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
                out[i] = self._compile_parts(
                    flat + e.flat + extra, others + e.combos, max(refs, e.refs, key=len), pointer
                )
        if all(r is None for r in out) and any(r is not None for r in results):
            self.refuse("oneOf", combo.pointer, "no branch can be proven disjoint from the others")
            return results
        return out

    def _facts(
        self, flat: list[tuple[dict[str, Any], str]], combos: list[_Combo], *, generated: bool
    ) -> Facts:
        merged = merge_flat([p for p, _ in flat], "") if flat else {}
        base = flat_facts(merged, generated=generated)
        for combo in combos:
            alts = []
            for branch, bptr in combo.branches:
                sub = self.expand(branch, bptr, combo.refs)
                if sub is not None:
                    alts.append(self._facts(sub.flat, sub.combos, generated=generated))
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

    def compile_flat(
        self, schema: dict[str, Any], pointer: str, refs: tuple[str, ...]
    ) -> str | None:
        """Regex of a flat (merged) schema."""
        if "const" in schema or "enum" in schema:
            # Every candidate is validated against the whole schema: exact for any keyword.
            return self._finite(schema, pointer)
        for key in schema:
            if key in REFUSED_GENERAL and key != "not":
                if key == "if" and not ({"then", "else"} & set(schema)):
                    continue
                self.refuse(key, pointer, "not supported by the constraint compiler")
        types = self._types(schema, pointer)
        if "not" in schema:
            negated = self._negate(schema["not"], schema, types, _child(pointer, "not"))
            if negated is None:
                return None
            schema, types = negated
        out: list[str | None] = []
        for t in types:
            if t == "null":
                out.append("null")
            elif t == "boolean":
                out.append("(?:true|false)")
            elif t in ("integer", "number"):
                out.append(self._number(schema, pointer, integer=t == "integer"))
            elif t == "string":
                out.append(self._string(schema, pointer))
            elif t == "array":
                out.append(self._array(schema, pointer, refs))
            elif t == "object":
                out.append(self._object(schema, pointer, refs))
        result = alt(out)
        if result is not None and len(result) > self.max_regex_chars:
            raise _RegexTooLarge(
                f"compiled regex exceeds {self.max_regex_chars} characters", pointer=pointer
            )
        return result

    def _negate(
        self, neg: Any, schema: dict[str, Any], types: list[str], pointer: str
    ) -> tuple[dict[str, Any], list[str]] | None:
        """Apply ``not: neg`` for the shapes that have an exact form; refuse the rest."""
        if neg is False:
            return schema, types
        if neg is True:
            return None
        if not isinstance(neg, dict):
            raise SchemaError("not must be a schema", keyword="not", pointer=pointer)
        keys = {k for k in neg if k in KNOWN_VALIDATION or k in _STRUCTURAL}
        if not keys:
            return None  # not {} rejects everything
        schema = dict(schema)
        if keys == {"anyOf"} and isinstance(neg["anyOf"], list):
            for i, branch in enumerate(neg["anyOf"]):
                done = self._negate(branch, schema, types, _child(pointer, "anyOf", i))
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
                self.refuse("not", pointer, "excluding integers from numbers")
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
        self.refuse("not", pointer, "only not {}, type, a single required key or string values")
        return schema, types

    def _types(self, schema: dict[str, Any], pointer: str) -> list[str]:
        if "type" in schema:
            t = schema["type"]
            names = [t] if isinstance(t, str) else t
            if not isinstance(names, list) or any(n not in (*JSON_TYPES, "integer") for n in names):
                raise SchemaError(f"unknown type {t!r}", keyword="type", pointer=pointer)
            if "number" in names:
                names = [n for n in names if n != "integer"]
            return list(dict.fromkeys(names))
        keys = set(schema)
        fam = []
        if keys & OBJECT_KEYWORDS:
            fam.append("object")
        if keys & ARRAY_KEYWORDS:
            fam.append("array")
        if keys & STRING_KEYWORDS:
            fam.append("string")
        if keys & NUMBER_KEYWORDS:
            fam.append("number")
        if "format" in keys and not fam:
            fmt = schema["format"]
            fam.append(
                "integer"
                if fmt in ("int32", "int64")
                else "number"
                if fmt in NUMERIC_FORMAT_RANGES
                else "string"
            )
        return fam or ["null", "boolean", "object", "array", "string", "number"]

    def _finite(self, schema: dict[str, Any], pointer: str) -> str | None:
        if "const" in schema:
            candidates = [schema["const"]]
        else:
            candidates = schema["enum"]
            if not isinstance(candidates, list):
                raise SchemaError("enum must be an array", keyword="enum", pointer=pointer)
        checks: list[dict[str, Any]] = []
        allowed_sets: list[set[Any]] = []
        for part in schema.get(PARTS_KEY, [schema]):
            part = {k: v for k, v in part.items() if k != PARTS_KEY}
            rest = {k for k in part if k in KNOWN_VALIDATION or k in _STRUCTURAL}
            if rest <= {"enum", "const"} and len(rest) == 1:
                # A bare enum/const: membership by JSON equality, no validator (large enums).
                values = [part["const"]] if "const" in part else list(part["enum"])
                allowed_sets.append({canonical(v) for v in values})
            elif rest:
                checks.append(part)
        kept: list[str] = []
        seen: set[Any] = set()
        for value in candidates:
            self._tick(pointer)
            try:
                key = canonical(value)
            except TypeError as exc:
                raise SchemaError(str(exc), keyword="enum", pointer=pointer) from exc
            if key in seen:
                continue
            seen.add(key)
            if all(key in allowed for allowed in allowed_sets) and all(
                self.is_valid(value, part) for part in checks
            ):
                kept.append(literal(json.dumps(value, ensure_ascii=False, separators=(",", ":"))))
        return alt(kept)

    # -- scalars ---------------------------------------------------------------

    def _number(self, schema: dict[str, Any], pointer: str, *, integer: bool) -> str | None:
        for key in ("multipleOf", "divisibleBy"):
            if key in schema:
                m = schema[key]
                if not (
                    integer and isinstance(m, (int, float)) and not isinstance(m, bool) and m == 1
                ):
                    self.refuse(key, pointer, "multiples are not enforced")
        lows: list[Bound] = []
        highs: list[Bound] = []
        for key, exclusive, side in (
            ("minimum", False, lows),
            ("exclusiveMinimum", True, lows),
            ("maximum", False, highs),
            ("exclusiveMaximum", True, highs),
        ):
            if key in schema:
                v = schema[key]
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise SchemaError(f"{key} must be a number", keyword=key, pointer=pointer)
                side.append(Bound(v, exclusive))
        fmt = schema.get("format")
        if fmt is not None:
            if fmt in NUMERIC_FORMAT_RANGES:
                rng = NUMERIC_FORMAT_RANGES[fmt]
                if rng is not None:
                    lows.append(Bound(rng[0], False))
                    highs.append(Bound(rng[1], False))
            elif not isinstance(fmt, str) or fmt in REFUSED_FORMATS:
                self.refuse("format", pointer, f"format {fmt!r} is not supported")
        lo = _strictest(lows, low=True)
        hi = _strictest(highs, low=False)
        if lo is None and hi is None:
            return any_number(integer=integer)
        if integer:
            from .numeric_ranges import highest_integer, lowest_integer

            return integer_range(
                lowest_integer(lo) if lo is not None else None,
                highest_integer(hi) if hi is not None else None,
            )
        return number_range(lo, hi)

    def _string(self, schema: dict[str, Any], pointer: str) -> str | None:
        min_len = schema.get("minLength", 0)
        max_len = schema.get("maxLength")
        for key, v in (("minLength", min_len), ("maxLength", max_len)):
            if v is not None and (
                isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v)
            ):
                raise SchemaError(
                    f"{key} must be a non-negative integer", keyword=key, pointer=pointer
                )
        min_len = int(min_len)
        max_len = None if max_len is None else int(max_len)
        fmt = schema.get("format")
        pattern = schema.get("pattern")
        if fmt is not None and not isinstance(fmt, str):
            raise SchemaError("format must be a string", keyword="format", pointer=pointer)
        if fmt is not None and fmt not in NUMERIC_FORMAT_RANGES:
            spec = string_format(fmt)
            if spec is None:
                if fmt in REFUSED_FORMATS:
                    self.refuse("format", pointer, f"format {fmt!r} is not supported")
                else:
                    logger.debug(
                        "format %r at %s is not a JSON Schema format: ignored", fmt, pointer
                    )
            else:
                if pattern is not None:
                    self.refuse("pattern", pointer, "pattern together with format")
                if spec.min_length < min_len or (
                    max_len is not None and (spec.max_length is None or spec.max_length > max_len)
                ):
                    if max_len is not None and max_len < spec.min_length:
                        return None
                    # The format's regex read as an anchored pattern, narrowed to the bounds.
                    try:
                        fitted = translate_pattern(f"^(?:{spec.regex})$", min_len, max_len).regex
                    except PatternError:
                        fitted = None
                    if fitted is not None:
                        return seq(_QUOTE, fitted, _QUOTE)
                    self.refuse(
                        "maxLength" if max_len is not None else "minLength",
                        pointer,
                        f"length bounds together with format {fmt!r}",
                    )
                return seq(_QUOTE, spec.regex, _QUOTE)
        elif fmt in NUMERIC_FORMAT_RANGES:
            self.refuse("format", pointer, f"format {fmt!r} applies to numbers, not strings")
        if pattern is not None:
            if not isinstance(pattern, str):
                raise SchemaError("pattern must be a string", keyword="pattern", pointer=pointer)
            try:
                tp = translate_pattern(pattern)
            except PatternError as exc:
                self.refuse("pattern", pointer, str(exc))
                return seq(_QUOTE, repeat(_ANY_UNIT, min_len, max_len), _QUOTE)
            if tp.regex is None:
                return None
            fits = tp.min_length >= min_len and (
                max_len is None or (tp.max_length is not None and tp.max_length <= max_len)
            )
            if not fits:
                if max_len is not None and tp.min_length > max_len:
                    return None
                # Narrow the pattern's repeats to the length bounds (a sound subset).
                bounded = translate_pattern(pattern, min_len, max_len)
                if bounded.regex is not None:
                    return seq(_QUOTE, bounded.regex, _QUOTE)
                self.refuse(
                    "maxLength" if max_len is not None else "minLength",
                    pointer,
                    "length bounds together with a pattern whose lengths differ",
                )
            return seq(_QUOTE, tp.regex, _QUOTE)
        if "__not_strings__" in schema:
            return _string_not_in(set(schema["__not_strings__"]))
        return seq(_QUOTE, repeat(_ANY_UNIT, min_len, max_len), _QUOTE)

    # -- containers ------------------------------------------------------------

    def any_value(self, depth: int) -> str:
        """Any JSON value nested at most ``depth`` containers deep."""
        if depth in self._any_cache:
            return self._any_cache[depth]
        scalars = [
            "null",
            "(?:true|false)",
            any_number(integer=False),
            seq(_QUOTE, repeat(_ANY_UNIT, 0, None), _QUOTE),
        ]
        if depth > 0:
            inner = self.any_value(depth - 1)
            ws = self.ws
            items = seq(inner, repeat(seq(ws, "\\x2c", ws, inner), 0, None))
            scalars.append(f"\\x5b{ws}{optional(seq(items, ws))}\\x5d")
            member = seq(_QUOTE, repeat(_ANY_UNIT, 0, None), _QUOTE, ws, "\\x3a", ws, inner)
            members = seq(member, repeat(seq(ws, "\\x2c", ws, member), 0, None))
            scalars.append(f"\\x7b{ws}{optional(seq(members, ws))}\\x7d")
        result = alt(scalars) or ""
        self._any_cache[depth] = result
        return result

    def _sub(self, schema: Any, pointer: str, refs: tuple[str, ...]) -> str | None:
        if schema is True or schema == {}:
            return self.any_value(self.any_depth)
        return self.compile(schema, pointer, refs)

    def _array(self, schema: dict[str, Any], pointer: str, refs: tuple[str, ...]) -> str | None:
        for key in ("contains", "minContains", "maxContains", "unevaluatedItems"):
            if key in schema and not (key == "unevaluatedItems" and schema[key] is True):
                if key in ("minContains", "maxContains") and "contains" not in schema:
                    continue
                self.refuse(key, pointer, "not supported by the constraint compiler")
        min_items = _count(schema, "minItems", pointer) or 0
        max_items = _count(schema, "maxItems", pointer)
        prefix_schemas = schema.get("prefixItems") or []
        if not isinstance(prefix_schemas, list):
            raise SchemaError(
                "prefixItems must be an array", keyword="prefixItems", pointer=pointer
            )
        if schema.get("uniqueItems") is True and (max_items is None or max_items > 1):
            values = (
                None
                if prefix_schemas
                else self._finite_items(schema.get("items", True), _child(pointer, "items"), refs)
            )
            if values is not None:
                return self._unique_array(values, min_items, max_items)
            self.refuse("uniqueItems", pointer, "uniqueness is enforced only for finite item sets")
        prefix = [
            self._sub(s, _child(pointer, "prefixItems", i), refs)
            for i, s in enumerate(prefix_schemas)
        ]
        items_schema = schema.get("items", True)
        item = (
            None
            if items_schema is False
            else self._sub(items_schema, _child(pointer, "items"), refs)
        )
        ws = self.ws
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

    def _finite_items(self, items: Any, pointer: str, refs: tuple[str, ...]) -> list[Any] | None:
        """The distinct valid values of an ``items`` schema that is an enum, a const or
        boolean (None when it is not finite in one of these ways)."""
        expanded = self.expand(items, pointer, refs)
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
            self._tick(pointer)
            key = canonical(value)
            if key not in seen and self.is_valid(value, items):
                seen.add(key)
                out.append(value)
        return out

    def _unique_array(self, values: list[Any], min_items: int, max_items: int | None) -> str | None:
        """Arrays of distinct ``values``: each written at most once, in the listed order (a
        narrowing); the first ``min_items`` are always written."""
        texts = [literal(json.dumps(v, ensure_ascii=False, separators=(",", ":"))) for v in values]
        if max_items is not None:
            texts = texts[:max_items]
        if min_items > len(texts):
            return None
        ws = self.ws
        members = ordered_members(
            [(t, i < min_items) for i, t in enumerate(texts)], f"{ws}\\x2c{ws}"
        )
        if members is None:
            return f"\\x5b{ws}\\x5d"
        inner = members if min_items > 0 else optional(members)
        return f"\\x5b{ws}{inner}{ws}\\x5d"

    def _object(self, schema: dict[str, Any], pointer: str, refs: tuple[str, ...]) -> str | None:
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
                values[name] = [(props[name], _child(pointer, "properties", name))]
            else:
                values[name] = [(extra_for_required, _child(pointer, "additionalProperties"))]
        generates_extra = extra_schema is not False
        forbidden: set[str] = set()
        self._pattern_properties(schema, pointer, names, values, generates_extra)
        self._property_names(schema, pointer, names, forbidden, generates_extra)
        self._dependencies(schema, pointer, names, required, forbidden, generates_extra)
        if any(name in forbidden for name in required):
            return None
        names = [n for n in names if n not in forbidden]
        min_props = _count(schema, "minProperties", pointer)
        max_props = _count(schema, "maxProperties", pointer)
        ws = self.ws
        entries: list[tuple[str, str, bool]] = []  # (name, regex of `"name":value`, required)
        for name in names:
            subs = values[name]
            if len(subs) == 1:
                sub, sptr = subs[0]
            else:
                sub, sptr = {"allOf": [x for x, _ in subs]}, subs[0][1]
            value = self._sub(sub, sptr, refs)
            is_required = name in required
            if value is None:
                if is_required:
                    return None
                continue
            key = literal(json.dumps(name, ensure_ascii=False))
            entries.append((name, f"{key}{ws}\\x3a{ws}{value}", is_required))
        extra: str | None = None
        if extra_schema is not False:
            value = self._sub(extra_schema, _child(pointer, "additionalProperties"), refs)
            key = _string_not_in(set(props) | set(required))
            extra = None if value is None or key is None else f"{key}{ws}\\x3a{ws}{value}"
        entries, extra = self._property_counts(entries, extra, min_props, max_props, pointer)
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
        self,
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
                self.refuse("minProperties", pointer, "fewer declared properties than required")
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
        self,
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
            self.refuse("patternProperties", pointer, "together with additionalProperties")
            return
        for pat, sub in pats.items():
            try:
                python_re = re.compile(pat)
                ours = translate_pattern(pat)
            except (re.error, PatternError) as exc:
                self.refuse("patternProperties", pointer, f"pattern {pat!r}: {exc}")
                return
            ours_re = re.compile(ours.regex or "(?!)")
            for name in names:
                hit = python_re.search(name) is not None
                encoded = json.dumps(name, ensure_ascii=False)[1:-1]
                if hit != (ours_re.fullmatch(encoded) is not None):
                    self.refuse(
                        "patternProperties", pointer, f"pattern {pat!r} is ambiguous for {name!r}"
                    )
                    return
                if hit:
                    values[name].append((sub, _child(pointer, "patternProperties", pat)))

    def _property_names(
        self,
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
            self.refuse("propertyNames", pointer, "together with additionalProperties")
            return
        for name in names:
            if not self.is_valid(name, rule):
                forbidden.add(name)

    def _dependencies(
        self,
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
                    self.refuse(
                        key, pointer, f"trigger {trigger!r} may appear as an undeclared key"
                    )
                continue
            if isinstance(dep, list):
                if trigger in required:
                    for d in dep:
                        if d not in required:
                            required.append(d)
                            if d not in names:
                                self.refuse(key, pointer, f"dependent key {d!r} is not declared")
                elif not all(d in required for d in dep):
                    forbidden.add(trigger)
            elif dep is True or dep == {}:
                continue
            elif trigger in required:
                self.refuse(key, pointer, f"schema dependency of required key {trigger!r}")
            else:
                forbidden.add(trigger)


def _required_sets(neg: dict[str, Any]) -> list[str] | None:
    """Keys of ``{"required": [...]}`` or an ``allOf`` of such schemas (else None)."""
    keys = {k for k in neg if k in KNOWN_VALIDATION or k in _STRUCTURAL}
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


def _strictest(bounds: list[Bound], *, low: bool) -> Bound | None:
    best: Bound | None = None
    for b in bounds:
        if best is None:
            best = b
            continue
        if ((b.value > best.value) if low else (b.value < best.value)) or (
            b.value == best.value and b.exclusive
        ):
            best = b
    return best


def _count(schema: dict[str, Any], key: str, pointer: str) -> int | None:
    if key not in schema:
        return None
    v = schema[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v):
        raise SchemaError(f"{key} must be a non-negative integer", keyword=key, pointer=pointer)
    return int(v)


def _string_not_in(excluded: set[str]) -> str | None:
    """A JSON string (no escapes) whose value is none of ``excluded``."""
    names = [n for n in excluded if all(ord(c) >= 0x20 and c not in '"\\' for c in n)]
    trie: dict[str, Any] = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[""] = {}
    any_char = encoded_unit(_KEY_CHAR_RANGES)

    def rest(node: dict[str, Any]) -> str:
        """Continuations from this trie node that leave the excluded set."""
        parts: list[str | None] = []
        if "" not in node:
            parts.append("")
        children = [c for c in node if c]
        for ch in children:
            parts.append(seq(literal(ch), rest(node[ch])))
        others = [(lo, hi) for lo, hi in _KEY_CHAR_RANGES]
        from .regex_text import complement

        other_class = encoded_unit(complement([(ord(c), ord(c)) for c in children], others))
        if other_class is not None:
            parts.append(seq(other_class, f"{any_char}*"))
        return alt(parts) or ""

    body = rest(trie)
    return f"{_QUOTE}{body}{_QUOTE}"
