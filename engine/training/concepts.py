"""What a synthetic tool *means*: a concept with many possible names, descriptions and phrasings.

A :class:`Concept` is one intent (look up an order, restart a service...). The
corpus turns it into a concrete, randomized tool (name, description, parameter
names and types) and a user request in one of many phrasings. Every pool here is
split into a training part and a held-out part by :func:`split_pool`, so the
held-out set uses names, descriptions and phrasings that training never saw.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .slots import Drawn

T = TypeVar("T")
Split = Literal["train", "heldout"]
ParamKind = Literal["string", "integer", "number", "boolean", "enum", "array", "object"]


def split_pool(pool: Sequence[T], split: Split) -> list[T]:
    """Every 4th item (or the last one of a short pool) is held out; the rest is for training."""
    items = list(pool)
    if len(items) < 2:
        return items
    held = [x for i, x in enumerate(items) if i % 4 == 3] or [items[-1]]
    if split == "heldout":
        return held
    return [x for x in items if x not in held]


@dataclass(frozen=True)
class Param:
    """One parameter of a concept; ``keys`` are the names a tool may give it."""

    role: str
    keys: tuple[str, ...]
    kind: ParamKind
    draw: Callable[[random.Random], Drawn]
    required: bool = True
    descs: tuple[str, ...] = ()
    enum: tuple[str, ...] = ()
    item_kind: str = "string"
    schema: Callable[[random.Random], dict[str, Any]] | None = None
    # Phrases that mention an optional parameter; ``{v}`` is its surface text.
    mention: tuple[str, ...] = ()
    # For booleans: phrases meaning ``false``.
    mention_false: tuple[str, ...] = ()
    # Optional enum form of a free-text parameter: (what the user says, enum value) pairs.
    enum_from: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Concept:
    """One tool intent with its name parts, descriptions, parameters, requests and answers."""

    key: str
    domain: str
    verbs: tuple[str, ...]
    nouns: tuple[str, ...]
    descs: tuple[str, ...]
    params: tuple[Param, ...]
    # Request templates; ``{role}`` placeholders for every required parameter.
    requests: tuple[str, ...]
    result: Callable[[random.Random, dict[str, Any]], dict[str, Any]]
    # Final-answer templates over the arguments and the result's fields.
    finals: tuple[str, ...]


def words(text: str) -> tuple[str, ...]:
    """``"a b c"`` → ``("a", "b", "c")``."""
    return tuple(text.split())


def lines(text: str) -> tuple[str, ...]:
    """``"a|b|c"`` → ``("a", "b", "c")`` (for phrases containing spaces)."""
    return tuple(s.strip() for s in text.split("|") if s.strip())
