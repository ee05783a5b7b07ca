"""The schema compiler's core: ``$ref``/``allOf``/``anyOf``/``oneOf`` expansion and dispatch.

:class:`Compiler` expands a schema into flat parts and pending combinators,
merges the flat parts (:mod:`.schema_merge`), and compiles the merged schema by
type: scalars in :mod:`.schema_scalars`, arrays in :mod:`.schema_arrays`, objects
in :mod:`.schema_objects`; ``oneOf`` separation and ``not`` in
:mod:`.schema_combinators`. Each of those takes the compiler as its context.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jsonschema
from referencing import Registry
from referencing.exceptions import NoSuchResource

from ..errors import SchemaError
from .json_values import canonical
from .numeric_ranges import any_number
from .regex_text import alt, literal, optional, repeat, seq
from .schema_arrays import compile_array
from .schema_combinators import negate, separate
from .schema_keywords import (
    KNOWN_VALIDATION,
    REFUSED_GENERAL,
    STRUCTURAL,
    child_pointer,
    schema_types,
)
from .schema_merge import PARTS_KEY, merge_flat
from .schema_objects import compile_object
from .schema_scalars import ANY_UNIT, QUOTE, compile_number, compile_string

#: The whole compiler logs under the front end's name, ``agentflow.engine.constraints.schema``.
logger = logging.getLogger(f"{__package__}.schema")


def _no_remote(uri: str) -> Any:
    raise NoSuchResource(ref=uri)


def offline_validator(schema: Any) -> Any:
    """A format-asserting validator for ``schema`` that never fetches remote references."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER, registry=Registry(retrieve=_no_remote))


class RegexTooLarge(SchemaError):
    """The regex outgrew ``max_regex_chars`` (recursive schemas retry with less unrolling)."""


@dataclass
class Combo:
    """An ``anyOf``/``oneOf`` still to be distributed over the flat parts beside it."""

    kind: str  # "anyOf" | "oneOf"
    branches: list[tuple[Any, str]]
    refs: tuple[str, ...]
    pointer: str


@dataclass
class Expanded:
    """A schema with ``$ref`` and ``allOf`` expanded: flat parts and pending combinators."""

    flat: list[tuple[dict[str, Any], str]]
    combos: list[Combo]
    refs: tuple[str, ...]


@dataclass
class Compiler:
    """One compilation of a root schema: its options, deadline (``time.thread_time``) and what
    it dropped."""

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

    def tick(self, pointer: str) -> None:
        """Raise SchemaError once the time limit (this thread's CPU time) has passed."""
        if time.thread_time() > self.deadline:
            raise SchemaError(
                f"compilation exceeded the time limit of {self.time_limit:g} s", pointer=pointer
            )

    def refuse(self, keyword: str, pointer: str, why: str) -> None:
        """Raise SchemaError (strict) or record the keyword as dropped."""
        if self.strict:
            raise SchemaError(
                f"{keyword!r} cannot be enforced exactly: {why}", keyword=keyword, pointer=pointer
            )
        where = child_pointer(pointer, keyword)
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
        """The sub-schema a local ``$ref`` names, and its pointer."""
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
            path = child_pointer(path, part)
        return node, path

    # -- expansion of $ref / allOf / anyOf / oneOf ---------------------------

    def expand(self, schema: Any, pointer: str, refs: tuple[str, ...]) -> Expanded | None:
        """Flat parts and pending combinators of ``schema``; None when it accepts nothing."""
        self.tick(pointer)
        out = Expanded([], [], refs)
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
                sub = self.expand(s, child_pointer(pointer, "allOf", i), refs)
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
                branches = [(s, child_pointer(pointer, kind, i)) for i, s in enumerate(subs)]
                out.combos.append(Combo(kind, branches, refs, pointer))
        rest = {k: v for k, v in schema.items() if k not in STRUCTURAL}
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
        return self.compile_parts(expanded.flat, expanded.combos, expanded.refs, pointer)

    def compile_parts(
        self,
        flat: list[tuple[dict[str, Any], str]],
        combos: list[Combo],
        refs: tuple[str, ...],
        pointer: str,
    ) -> str | None:
        """Regex of flat parts combined with each branch of the pending combinators."""
        self.tick(pointer)
        if not combos:
            parts = [p for p, _ in flat]
            where = flat[0][1] if len(flat) == 1 else pointer
            merged = merge_flat(parts, where) if parts else {}
            return self.compile_flat(merged, where, refs)
        combo, others = combos[0], combos[1:]
        results: list[str | None] = []
        expansions: list[Expanded | None] = []
        for branch, bptr in combo.branches:
            sub = self.expand(branch, bptr, combo.refs)
            expansions.append(sub)
            if sub is None:
                results.append(None)
                continue
            results.append(
                self.compile_parts(
                    flat + sub.flat, others + sub.combos, max(refs, sub.refs, key=len), pointer
                )
            )
        if combo.kind == "oneOf" and len(combo.branches) > 1:
            results = separate(self, combo, flat, others, refs, pointer, expansions, results)
        return alt(results)

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
        types = schema_types(schema, pointer)
        if "not" in schema:
            negated = negate(self, schema["not"], schema, types, child_pointer(pointer, "not"))
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
                out.append(compile_number(self, schema, pointer, integer=t == "integer"))
            elif t == "string":
                out.append(compile_string(self, schema, pointer))
            elif t == "array":
                out.append(compile_array(self, schema, pointer, refs))
            elif t == "object":
                out.append(compile_object(self, schema, pointer, refs))
        result = alt(out)
        if result is not None and len(result) > self.max_regex_chars:
            raise RegexTooLarge(
                f"compiled regex exceeds {self.max_regex_chars} characters", pointer=pointer
            )
        return result

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
            rest = {k for k in part if k in KNOWN_VALIDATION or k in STRUCTURAL}
            if rest <= {"enum", "const"} and len(rest) == 1:
                # A bare enum/const: membership by JSON equality, no validator (large enums).
                values = [part["const"]] if "const" in part else list(part["enum"])
                allowed_sets.append({canonical(v) for v in values})
            elif rest:
                checks.append(part)
        kept: list[str] = []
        seen: set[Any] = set()
        for value in candidates:
            self.tick(pointer)
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

    # -- containers ------------------------------------------------------------

    def any_value(self, depth: int) -> str:
        """Any JSON value nested at most ``depth`` containers deep."""
        if depth in self._any_cache:
            return self._any_cache[depth]
        scalars = [
            "null",
            "(?:true|false)",
            any_number(integer=False),
            seq(QUOTE, repeat(ANY_UNIT, 0, None), QUOTE),
        ]
        if depth > 0:
            inner = self.any_value(depth - 1)
            ws = self.ws
            items = seq(inner, repeat(seq(ws, "\\x2c", ws, inner), 0, None))
            scalars.append(f"\\x5b{ws}{optional(seq(items, ws))}\\x5d")
            member = seq(QUOTE, repeat(ANY_UNIT, 0, None), QUOTE, ws, "\\x3a", ws, inner)
            members = seq(member, repeat(seq(ws, "\\x2c", ws, member), 0, None))
            scalars.append(f"\\x7b{ws}{optional(seq(members, ws))}\\x7d")
        result = alt(scalars) or ""
        self._any_cache[depth] = result
        return result

    def sub(self, schema: Any, pointer: str, refs: tuple[str, ...]) -> str | None:
        """Regex of a member or element schema (``true``/``{}``: any value, ``any_depth`` deep)."""
        if schema is True or schema == {}:
            return self.any_value(self.any_depth)
        return self.compile(schema, pointer, refs)
