"""Held-out cases with long prompts: earlier finished exchanges put in front.

The corpus keeps conversations of at most ``data.max_len`` tokens (512), and the
held-out cases are as short; a real agent's prompt is often longer — a long tool
list, earlier turns. The demo's answer step is 595 tokens, and the models had
never been trained on a query that far from its keys. :func:`lengthened` puts
finished exchanges of other held-out conversations (request, call, result,
answer) in front of each case until its prompt has at least ``min_tokens``
tokens, so ``agentflow eval --min-prompt-tokens N`` measures how a model holds
up past its training length. The case itself — tools, request, expected action —
is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from ..chat_template import ChatMessage
from .concepts import Split
from .corpus import CorpusGenerator, Sample

#: At most this many exchanges go in front of one case.
MAX_EXCHANGES = 24
#: The donor conversations' seed offset: they differ from the cases themselves.
_DONOR_SEED_OFFSET = 7919


def _exchanges(split: Split, seed: int) -> Iterator[list[ChatMessage]]:
    """Finished exchanges (request, call, result, answer) of fresh conversations."""
    gen = CorpusGenerator(split, seed + _DONOR_SEED_OFFSET)
    while True:
        s = gen.sample()
        if s.kind == "final" and s.messages and s.messages[-1].role == "tool":
            yield [*s.messages, ChatMessage("assistant", s.target)]


def lengthened(
    samples: Sequence[Sample],
    min_tokens: int,
    count_tokens: Callable[[str], int],
    *,
    seed: int,
    split: Split = "heldout",
) -> list[Sample]:
    """``samples`` with earlier exchanges in front, until each prompt has at least
    ``min_tokens`` tokens (``count_tokens`` counts a rendered prompt's tokens)."""
    if min_tokens <= 0:
        return list(samples)
    donors = _exchanges(split, seed)
    out: list[Sample] = []
    for sample in samples:
        history: list[ChatMessage] = []
        longer = sample
        added = 0
        while count_tokens(longer.prompt()) < min_tokens:
            if added == MAX_EXCHANGES:
                raise ValueError(
                    f"{MAX_EXCHANGES} exchanges did not make a prompt {min_tokens} tokens long"
                )
            history = next(donors) + history
            added += 1
            longer = replace(sample, messages=(*history, *sample.messages))
        out.append(longer)
    return out
