"""Randomized tools for the corpus: names, descriptions, parameters, distractors.

Every sample builds fresh tools from the concepts (:mod:`.domain_support`,
:mod:`.domain_itops`): a name from a verb and a noun in one of three styles, a
description, parameter names, optional vs required, ``T | null`` forms, free text
declared as an enum, unused extra parameters, and ``e.g.`` examples that must not be
copied. The training split hides some names (:mod:`.augment`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ..chat_template import ToolSpec
from . import augment, domain_itops, domain_support
from .augment import Augmentation
from .concepts import Concept, Param, Split, split_pool
from .made_up_tools import MadeUpTool, made_up_tool

ALL_CONCEPTS: tuple[Concept, ...] = (
    domain_support.CONCEPTS + domain_itops.CONCEPTS + domain_itops.GENERAL
)

# Made-up names must never coincide with a real pool word of either split.
POOL_VERBS = {v for c in ALL_CONCEPTS for v in c.verbs}
POOL_KEYS = {k for c in ALL_CONCEPTS for p in c.params for k in p.keys}
POOL_NOUNS = {n for c in ALL_CONCEPTS for n in c.nouns}
#: What a made-up tool's invented verb and noun must not be.
POOL_WORDS = frozenset(POOL_VERBS | POOL_NOUNS)

EXTRA_PARAMS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("dry_run", {"type": "boolean"}),
    ("timeout", {"type": "integer"}),
    ("locale", {"type": "string"}),
    ("verbose", {"type": "boolean"}),
    ("region", {"type": "string"}),
    ("max_retries", {"type": "integer"}),
    ("tags", {"type": "array", "items": {"type": "string"}}),
    ("notes", {"type": "string"}),
)


@dataclass
class Tool:
    """A randomized tool for one concept, with what a request for it needs."""

    concept: Concept
    spec: ToolSpec
    keys: dict[str, str]  # role -> parameter name
    params: list[Param]
    forced: set[str] = field(default_factory=set)  # optional roles this tool declares required
    enum_roles: set[str] = field(default_factory=set)  # free-text roles declared as enums


def camel_case(snake: str) -> str:
    """``order_status`` → ``orderStatus``."""
    head, *rest = snake.split("_")
    return head + "".join(p.capitalize() for p in rest)


def tool_name(verb: str, noun: str, rng: random.Random) -> str:
    """``verb_noun``, ``verbNoun`` or ``noun_verb``."""
    style = rng.random()
    if style < 0.6:
        return f"{verb}_{noun}"
    if style < 0.9:
        return camel_case(f"{verb}_{noun}")
    return f"{noun}_{verb}"


def base_schema(param: Param, rng: random.Random) -> dict[str, Any]:
    """The JSON schema of one parameter, before description and nullable forms."""
    if param.kind == "enum":
        return {"type": "string", "enum": list(param.enum)}
    if param.kind == "array":
        return {"type": "array", "items": {"type": param.item_kind}}
    if param.kind == "object":
        assert param.schema is not None, param.role
        return param.schema(rng)
    return {"type": param.kind}


class ToolMaker:
    """Draws tools for one split from a generator's random stream (shared, so reproducible)."""

    def __init__(self, rng: random.Random, split: Split, augmentation: Augmentation) -> None:
        self.rng = rng
        self.split: Split = split
        self.augmentation = augmentation

    def chance(self, p: float) -> bool:
        """True with probability ``p``; draws nothing when ``p == 0`` (held-out stays stable)."""
        return augment.chance(self.rng, p)

    def _pool(self, pool: Any) -> list[Any]:
        return split_pool(pool, self.split)

    def make_tool(self, concept: Concept, taken: set[str]) -> Tool:
        """A randomized tool for ``concept`` whose name is not in ``taken``."""
        rng, aug = self.rng, self.augmentation
        verbs, nouns = self._pool(concept.verbs), list(concept.nouns)
        opaque_name = self.chance(aug.opaque_tool)

        def draw_name() -> str:
            if opaque_name:
                return augment.made_up_word(rng, (2, 4))
            verb = rng.choice(verbs)
            if self.chance(aug.opaque_verb):
                verb = augment.opaque_verb(rng, POOL_VERBS)
            return tool_name(verb, rng.choice(nouns), rng)

        name = draw_name()
        for _ in range(20):
            if name not in taken:
                break
            name = draw_name()
        else:
            name = f"{name}_{len(taken)}"
        properties: dict[str, Any] = {}
        required: list[str] = []
        keys: dict[str, str] = {}
        params: list[Param] = []
        forced: set[str] = set()
        enum_roles: set[str] = set()
        for param in concept.params:
            if not param.required and rng.random() < 0.2:
                continue
            is_required = param.required
            if not param.required and rng.random() < 0.25:
                forced.add(param.role)
                is_required = True
            options = [k for k in self._pool(param.keys) if k not in properties]
            key = rng.choice(options or [f"{param.role}_arg"])
            if self.chance(aug.opaque_key):
                key = augment.opaque_key(rng, POOL_KEYS, set(properties))
            schema = base_schema(param, rng)
            if param.enum_from and rng.random() < 0.5:
                values = list(dict.fromkeys(v for _, v in param.enum_from))
                rng.shuffle(values)
                schema = {"type": "string", "enum": values}
                enum_roles.add(param.role)
            if param.descs and rng.random() < 0.3:
                desc = rng.choice(self._pool(param.descs))
                drawn = param.draw(rng)
                enum_form = param.role in enum_roles
                if param.kind == "string" and drawn.copied and not enum_form and rng.random() < 0.3:
                    desc += f", e.g. {drawn.surface}"
                schema["description"] = desc + ("." if rng.random() < 0.5 else "")
            if not is_required and rng.random() < 0.5:
                schema = {"anyOf": [schema, {"type": "null"}], "default": None}
            properties[key] = schema
            if is_required:
                required.append(key)
            keys[param.role] = key
            params.append(param)
        if rng.random() < 0.2:
            extra, schema = rng.choice(EXTRA_PARAMS)
            if extra not in properties:
                properties[extra] = dict(schema)
        no_description = rng.random() < 0.1 and not opaque_name
        description = "" if no_description else rng.choice(self._pool(concept.descs))
        parameters = {"type": "object", "properties": properties, "required": required}
        tool = ToolSpec(name, description, parameters)
        return Tool(concept, tool, keys, params, forced, enum_roles)

    def toolset(self, wanted: list[Concept]) -> tuple[list[Tool], list[Tool]]:
        """Tools for ``wanted`` plus 0–6 distractors, shuffled; returns (all, wanted tools)."""
        rng = self.rng
        total = max(len(wanted), min(8, rng.choice((2, 2, 3, 3, 3, 4, 4, 5, 6, 7, 8))))
        chosen = list(wanted)
        same = [c for c in ALL_CONCEPTS if c.domain == wanted[0].domain and c not in chosen]
        others = [c for c in ALL_CONCEPTS if c not in chosen]
        while len(chosen) < total:
            pool = same if same and rng.random() < 0.6 else others
            pool = [c for c in pool if c not in chosen]
            if not pool:
                break
            chosen.append(rng.choice(pool))
        taken: set[str] = set()
        tools: list[Tool] = []
        for concept in chosen:
            tool = self.make_tool(concept, taken)
            taken.add(tool.spec.name)
            tools.append(tool)
        primary = tools[: len(wanted)]
        rng.shuffle(tools)
        return tools, primary

    def specs(self, tools: list[Tool]) -> tuple[ToolSpec, ...]:
        """The prompt's tool list; made-up tools may join as distractors.

        Made-up names are targets in the made-up conversations; they must be
        distractors too, or "the unfamiliar name is the one" becomes a shortcut.
        """
        specs = [t.spec for t in tools]
        if self.chance(self.augmentation.made_up_distractors):
            avoid = set(POOL_WORDS)
            taken = {s.name for s in specs}
            for _ in range(self.rng.choice((1, 1, 2))):
                spec = self.made_up(avoid).spec
                if spec.name not in taken:
                    specs.insert(self.rng.randint(0, len(specs)), spec)
                    taken.add(spec.name)
        return tuple(specs)

    def made_up(self, avoid: set[str], noun: str | None = None) -> MadeUpTool:
        """A tool named and described in invented words, none of ``avoid`` (which gains them).

        Start ``avoid`` from :data:`POOL_WORDS` and share it across one conversation's tools.
        """
        return made_up_tool(self.rng, tool_name, avoid, noun)
