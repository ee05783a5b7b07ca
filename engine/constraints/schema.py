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

This module is the public front end; the compiler itself is
:class:`~.schema_compiler.Compiler` with its parts for scalars, arrays, objects
and combinators in the ``schema_*`` modules beside it.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jsonschema

from ..errors import EngineError, SchemaError
from .regex_text import MAX_SYNTAX_DEPTH, syntax_depth
from .schema_compiler import Compiler, RegexTooLarge, offline_validator

#: Default cap on the regex size. outlines-core's index needs seconds and hundreds of MB
#: around 100-200k characters (2k-token vocabulary) and did not finish on a 300k one.
DEFAULT_MAX_REGEX_CHARS = 100_000


class OutputValidationError(EngineError):
    """Generated text is not valid JSON for the schema (only possible with ``strict=False``)."""


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
    schema, and when compilation exceeds ``time_limit`` seconds of this thread's CPU
    time (a loaded machine that deschedules the thread does not count against the
    schema) or the regex ``max_regex_chars`` characters.
    """
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}")
    start = time.perf_counter()
    cpu_start = time.thread_time()
    depth = max_depth
    while True:
        compiler = Compiler(
            root=schema,
            strict=strict,
            deadline=cpu_start + time_limit,
            time_limit=time_limit,
            max_depth=depth,
            any_depth=any_depth,
            ws=f"[\\x20\\x0a\\x09]{{0,{max_whitespace}}}" if max_whitespace > 0 else "",
            max_regex_chars=max_regex_chars,
        )
        try:
            regex = compiler.compile(schema, "", ())
            if regex is not None and len(regex) > max_regex_chars:
                raise RegexTooLarge(
                    f"compiled regex exceeds {max_regex_chars} characters", pointer=""
                )
            break
        except RegexTooLarge:
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
