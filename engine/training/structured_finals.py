"""Structured final outputs in the corpus: the answer as a JSON object.

An agent with a typed output (``Agent(output_type=Report)``) ends its run with
``{"final": {...}}``, and the prompt shows the object's shape on a ``final:``
line of the tools block (:func:`~agentflow.engine.chat_template.render_output`).
Until these samples the corpus only had text answers, so the models filled such
objects with answer sentences in every field.

:func:`structured_output` turns one tool result into such an output: one to
three of the result's fields, under the result's key or a variant of it
(``status``, ``orderStatus``, ``current_status``), with the value copied (a
string field that takes a few word values — a status, not an id — sometimes
declared as an enum of them), often a text field holding the answer sentence,
and sometimes an empty list field (``actions: []``). Key variants, text-field names and descriptions come
from pools split like every other pool, so held-out outputs use words training
never saw.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from .concepts import Split, lines, split_pool, words
from .tool_maker import camel_case

#: Names of the field that holds the answer sentence.
TEXT_KEYS = words(
    "summary answer message reply text note response explanation details comment "
    "result_text outcome"
)
#: Names of an optional list field left empty (nothing to list after a plain lookup).
LIST_KEYS = words("actions next_steps notes tags follow_ups warnings items_to_check todo")
#: Words put before a copied field's key (``current_status``) ...
KEY_PREFIXES = words("current reported found the final latest given returned")
#: ... or after it (``status_value``).
KEY_SUFFIXES = words("value field info text data result reported out")
#: The output's own description, when it has one.
DESCRIPTIONS = lines(
    "The answer for the user.|What the agent reports back.|The result of the request.|"
    "A structured reply.|The final report.|What to show the customer.|"
    "The outcome, as data.|Answer fields for the caller."
)
#: Descriptions of the text field, when it has one.
TEXT_DESCRIPTIONS = lines(
    "One sentence for the user.|A short human-readable answer.|What to tell the customer.|"
    "A one-line summary.|Plain-language result.|The answer as text."
)

#: Longest string an enum field may take (a categorical value, not an id or a sentence).
_ENUM_MAX_CHARS = 24


def _variant(rng: random.Random, key: str, split: Split, taken: set[str]) -> str:
    """``key`` itself, its camelCase form, or ``key`` with a pool word before or after it."""
    for _ in range(6):
        r = rng.random()
        if r < 0.45:
            out = key
        elif r < 0.6 and "_" in key:
            out = camel_case(key)
        elif r < 0.8:
            out = f"{rng.choice(split_pool(KEY_PREFIXES, split))}_{key}"
        else:
            out = f"{key}_{rng.choice(split_pool(KEY_SUFFIXES, split))}"
        if out not in taken:
            return out
    return f"{key}_{len(taken)}"


def _has_digit(text: str) -> bool:
    return any(c.isdigit() for c in text)


def _type_of(value: Any) -> dict[str, Any] | None:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    return None  # lists and objects stay out of the output


def structured_output(
    rng: random.Random,
    split: Split,
    result: dict[str, Any],
    answer: str,
    quoted: Sequence[str],
    redraw: Callable[[], dict[str, Any]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(output JSON Schema, output value) for an answer built from ``result``.

    ``quoted``: the result fields the answer sentence uses (preferred as copied
    fields); ``redraw()`` draws another result of the same tool, whose values of a
    string field become that field's enum when they are few and short.
    """
    scalar = [k for k, v in result.items() if _type_of(v) is not None]
    preferred = [k for k in quoted if k in scalar]
    others = [k for k in scalar if k not in preferred]
    rng.shuffle(others)
    n = min(len(scalar), rng.choice((1, 2, 2, 3)))
    chosen = (preferred + others)[:n] if rng.random() < 0.75 else (others + preferred)[:n]
    alternatives = [redraw() for _ in range(5)]
    fields: list[tuple[str, dict[str, Any], Any]] = []
    taken: set[str] = set()
    for key in chosen:
        value = result[key]
        schema = _type_of(value)
        assert schema is not None
        seen = {value} | {a.get(key) for a in alternatives if isinstance(a.get(key), str)}
        if (
            isinstance(value, str)
            and 2 <= len(seen) <= 8
            and all(len(str(v)) <= _ENUM_MAX_CHARS and not _has_digit(str(v)) for v in seen)
            and rng.random() < 0.6
        ):
            options = sorted(str(v) for v in seen)
            rng.shuffle(options)
            schema = {"enum": options}
        name = _variant(rng, key, split, taken)
        taken.add(name)
        fields.append((name, schema, value))
    if not fields or rng.random() < 0.7:
        name = rng.choice([k for k in split_pool(TEXT_KEYS, split) if k not in taken])
        taken.add(name)
        schema = {"type": "string"}
        if rng.random() < 0.3:
            schema["description"] = rng.choice(split_pool(TEXT_DESCRIPTIONS, split))
        fields.insert(rng.randrange(len(fields) + 1), (name, schema, answer))
    optional: list[str] = []
    if rng.random() < 0.2:
        name = rng.choice([k for k in split_pool(LIST_KEYS, split) if k not in taken])
        fields.append((name, {"type": "array", "items": {"type": "string"}}, []))
        optional.append(name)
    if rng.random() < 0.2:  # a copied field may be optional too; the answer still fills it
        optional.append(fields[0][0])
    out_schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: schema for name, schema, _ in fields},
        "required": [name for name, _, _ in fields if name not in optional],
    }
    if rng.random() < 0.5:
        out_schema["description"] = rng.choice(split_pool(DESCRIPTIONS, split))
    return out_schema, {name: value for name, _, value in fields}
