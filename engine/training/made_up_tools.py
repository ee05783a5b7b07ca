"""Made-up intents: tools named and described in invented words, requested in those words.

The corpus's real concepts let a small model learn *this description means that
intent*, which does not carry over to descriptions and requests it has never
seen. A made-up tool (``brekli_tovasa``: "Brekli a tovasa") can only be chosen by
matching the request's words against the tool list, and its parameters filled
by matching the values (and the parameter names the request mentions) — the
skill an unseen tool needs. Training mixes in a share of these conversations
(``Augmentation.made_up_intent``); the held-out split never draws them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..chat_template import ToolSpec
from . import slots
from .augment import made_up_word
from .concepts import lines
from .slots import Drawn

# (JSON type, draw) for the values a made-up tool takes.
_VALUES: tuple[tuple[str, Callable[[random.Random], Drawn]], ...] = (
    ("string", slots.order_id),
    ("string", slots.host),
    ("string", slots.email),
    ("string", slots.username),
    ("string", slots.service),
    ("string", slots.customer_id),
    ("string", slots.invoice_id),
    ("string", slots.city),
    ("string", slots.title),
    ("integer", slots.integer(1, 500)),
    ("number", slots.amount),
)
_DESCRIPTIONS = lines(
    "{Verb} a {noun}|{Verb} one {noun}|{Verb} the given {noun}|Use this to {verb} a {noun}|"
    "{Verb} a {noun} by its id|Call to {verb} one {noun}|{Verb}s a {noun}"
)
_REQUESTS = lines(
    "{verb} the {noun} {v}|please {verb} {noun} {v}|can you {verb} {v}?|"
    "I need to {verb} a {noun}: {v}|{noun} {v}: {verb} it please|{verb} {v}|"
    "could you {verb} {noun} {v} for me|time to {verb} the {noun} {v}|{v} needs a {verb}"
)
# How a request names a second parameter: ``{k}`` is its name, ``{v}`` its value.
_SECOND = (" with {k} {v}", ", {k} {v}", " and set {k} to {v}", " ({k}: {v})", " using {k}={v}")
_KEYS = ("id", "{noun}", "{noun}_id", "{noun}Id", "target", "value", "{made_up}")


@dataclass
class MadeUpRequest:
    """One request for a made-up tool and the call it expects."""

    text: str
    call: tuple[str, dict[str, Any]]
    copied: list[str]


@dataclass
class MadeUpTool:
    """A made-up tool and how to ask for it."""

    spec: ToolSpec
    verb: str
    noun: str
    keys: list[str]
    values: list[Callable[[random.Random], Drawn]]

    def request(self, rng: random.Random) -> MadeUpRequest:
        """A request in the tool's own words; the second parameter, if any, is named."""
        drawn = [draw(rng) for draw in self.values]
        template = rng.choice(_REQUESTS)
        text = template.format(verb=self.verb, noun=self.noun, v=drawn[0].surface)
        if len(drawn) > 1:
            text += rng.choice(_SECOND).format(k=self.keys[1], v=drawn[1].surface)
        args = {k: d.value for k, d in zip(self.keys, drawn, strict=True)}
        copied = [d.surface for d in drawn if d.copied]
        return MadeUpRequest(text, (self.spec.name, args), copied)


def made_up_tool(
    rng: random.Random,
    name_style: Callable[[str, str, random.Random], str],
    avoid: set[str],
    noun: str | None = None,
) -> MadeUpTool:
    """A tool whose verb (and noun, unless given) are made up; ``avoid`` holds words in use."""
    verb = _fresh(rng, avoid)
    avoid.add(verb)
    noun = noun or _fresh(rng, avoid)
    avoid.add(noun)
    name = name_style(verb, noun, rng)
    n_params = 1 if rng.random() < 0.6 else 2
    kinds = rng.sample(_VALUES, n_params)
    keys: list[str] = []
    for i in range(n_params):
        if i == 0:
            key = rng.choice(_KEYS).format(noun=noun, made_up=made_up_word(rng))
        else:
            key = made_up_word(rng, (2, 2))
        keys.append(key if key not in keys else f"{key}_{i}")
    properties = {k: {"type": t} for k, (t, _) in zip(keys, kinds, strict=True)}
    description = rng.choice(_DESCRIPTIONS).format(Verb=verb.capitalize(), verb=verb, noun=noun)
    parameters = {"type": "object", "properties": properties, "required": list(keys)}
    return MadeUpTool(
        ToolSpec(name, description, parameters), verb, noun, keys, [d for _, d in kinds]
    )


def _fresh(rng: random.Random, avoid: set[str]) -> str:
    for _ in range(20):
        word = made_up_word(rng)
        if word not in avoid:
            return word
    return made_up_word(rng, (4, 5))
