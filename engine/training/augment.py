"""Training-only perturbations that make memorizing tool and parameter names useless.

The held-out split names tools and parameters with words training never saw. A
small model trained on the training pools alone learns *which names go with which
intent* and is lost when the names change: on held-out conversations the shipped
verifier's loss was 2.7 nats per target token against 0.19 on fresh training-split
ones. These perturbations, applied to the training split only, replace a share of
tool-name verbs, whole tool names and parameter names with generic or made-up
words, and drop a few words from requests. The model then has to read the tool
list — its descriptions, the parameters' order, types and descriptions, the shape
of the values in the request — to choose a tool and fill its arguments.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from .concepts import words

# Uninformative words a real API might use too ("do_order", "run_task", "arg1").
_GENERIC_VERBS = words(
    "do run handle perform apply exec call use invoke trigger submit op action task go "
    "make execute request"
)
_GENERIC_KEYS = words(
    "arg value input param field data x item target ref key subject what p a val entry "
    "payload query object thing"
)
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "tr", "kl")
_VOWELS = ("a", "e", "i", "o", "u")


@dataclass(frozen=True)
class Augmentation:
    """How often each perturbation applies (probabilities per tool, parameter or request)."""

    opaque_verb: float = 0.25  # the tool name's verb becomes generic or made up
    opaque_tool: float = 0.05  # the whole tool name is made up (the description says what it does)
    opaque_key: float = 0.25  # a parameter name becomes generic or made up
    drop_words: float = 0.3  # a request loses some of its literal words ...
    drop_rate: float = 0.08  # ... each with this probability
    made_up_intent: float = 0.15  # a conversation about made-up tools (made_up_tools.py)
    made_up_distractors: float = 0.2  # other conversations list 1-2 made-up tools they don't need
    reshaped_results: float = 0.0  # a tool result loses fields its answer ignores, gains 2-6 others
    more_parallel: float = 0.0  # a single-call conversation is drawn as a parallel-call one instead
    more_extras: float = 0.0  # a result gains 2-5 of the usual extra fields, may lose others
    more_connectors: float = 0.0  # two requests are joined by a phrasing.MORE_CONNECTORS joiner
    structured_finals: float = (
        0.0  # an answer after a tool result is a JSON object (structured_finals.py)
    )
    more_chains: float = 0.0  # a single-call conversation is drawn as a refund without an amount


#: What the training split uses.
TRAINING = Augmentation()
#: What the held-out split uses: nothing.
NONE = Augmentation(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


def from_setting(setting: bool | Mapping[str, float]) -> Augmentation:
    """A config's ``data.augment``: ``true`` (:data:`TRAINING`), ``false`` (:data:`NONE`),
    or an object overriding some of :data:`TRAINING`'s probabilities."""
    if isinstance(setting, bool):
        return TRAINING if setting else NONE
    if not isinstance(setting, Mapping):
        raise ValueError(f"augment must be true, false or an object, got {setting!r}")
    names = [f.name for f in fields(Augmentation)]
    unknown = sorted(set(setting) - set(names))
    if unknown:
        raise ValueError(f"unknown augment keys {unknown}; known: {names}")
    for key, value in setting.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ValueError(f"augment.{key} must be a probability in [0, 1], got {value!r}")
    return replace(TRAINING, **{k: float(v) for k, v in setting.items()})


def chance(rng: random.Random, p: float) -> bool:
    """True with probability ``p``; draws nothing when ``p == 0``, so switching a
    perturbation off leaves every other draw, and the held-out split, unchanged."""
    return p > 0 and rng.random() < p


def made_up_word(rng: random.Random, syllables: tuple[int, int] = (2, 3)) -> str:
    """A pronounceable word that means nothing (``"tresami"``)."""
    n = rng.randint(*syllables)
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(n))


def opaque_verb(rng: random.Random, avoid: set[str]) -> str:
    """A generic verb (``"handle"``) or a made-up one, never one of ``avoid``."""
    for _ in range(10):
        word = rng.choice(_GENERIC_VERBS) if rng.random() < 0.5 else made_up_word(rng)
        if word not in avoid:
            return word
    return made_up_word(rng, (3, 4))


def opaque_key(rng: random.Random, avoid: set[str], taken: set[str]) -> str:
    """A generic (``"arg2"``) or made-up parameter name, not in ``avoid`` nor ``taken``."""
    for _ in range(20):
        r = rng.random()
        if r < 0.4:
            word = rng.choice(_GENERIC_KEYS)
        elif r < 0.6:
            word = f"{rng.choice(_GENERIC_KEYS)}{rng.randint(1, 4)}"
        else:
            word = made_up_word(rng)
        if word not in avoid and word not in taken:
            return word
    return f"{made_up_word(rng, (3, 4))}_{len(taken)}"


def drop_words(text: str, rng: random.Random, rate: float) -> str:
    """Drop each word of ``text`` with probability ``rate``; keeps the edge spaces."""
    words = text.split(" ")
    kept = [w for w in words if not w or rng.random() >= rate]
    if not any(kept):
        return text
    return " ".join(kept)
