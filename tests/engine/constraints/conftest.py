"""Fixtures for the constraint tests: a tiny byte-level BPE tokenizer and regex → TokenAutomaton."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import torch
from outlines_core import Index, Vocabulary
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from agentflow.engine.chat_template import SPECIAL_TOKENS
from agentflow.engine.constraints.automaton import TokenAutomaton
from agentflow.engine.tokenizer import Tokenizer

_CORPUS = [
    json.dumps({"name": "get_order", "arguments": {"order_id": 58213, "verbose": True}}),
    json.dumps({"tool_calls": [{"name": "search", "arguments": {"query": "refund policy"}}]}),
    json.dumps({"final": "Your order ships tomorrow.", "status": "ok", "count": 3}),
    json.dumps({"city": "Paris", "temperature": -3.5, "tags": ["a", "b"], "ok": False}),
    '{"final":null,"items":[1,2,3],"nested":{"x":"y"}}',
]


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    """A ~400-token byte-level BPE trained on JSON-ish text, with the engine's special tokens."""
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(_CORPUS * 20, trainer=trainer)
    return Tokenizer(hf)


def automaton_from_regex(regex: str, tok: Tokenizer) -> TokenAutomaton:
    """An independent TokenAutomaton straight from ``outlines_core.Index`` (the contract of
    ``automaton.py``); other tests use it as a second implementation of the builder."""
    assert tok.end_id is not None
    by_bytes: dict[bytes, list[int]] = {}
    for tid in range(tok.vocab_size):
        if tid in tok.special_ids:
            continue
        by_bytes.setdefault(tok.token_bytes(tid), []).append(tid)
    index = Index(regex, Vocabulary(tok.end_id, by_bytes))
    transitions = index.get_transitions()
    raw_states = sorted({index.get_initial_state(), *transitions})
    dense = {q: i for i, q in enumerate(raw_states)}
    done = len(raw_states)
    num_states = done + 1
    edges: list[list[tuple[int, int]]] = [[] for _ in range(num_states)]
    final = torch.zeros(num_states, dtype=torch.bool)
    for q, out in transitions.items():
        for t, r in out.items():
            if t != tok.end_id:
                edges[dense[q]].append((t, dense[r]))
    for q in raw_states:
        if index.is_final_state(q):
            final[dense[q]] = True
            edges[dense[q]].append((tok.end_id, done))
    final[done] = True
    edges[done].append((tok.end_id, done))
    offsets = [0]
    tokens: list[int] = []
    nexts: list[int] = []
    for out in edges:
        out.sort()
        tokens += [t for t, _ in out]
        nexts += [r for _, r in out]
        offsets.append(len(tokens))
    successors = torch.zeros(num_states, num_states, dtype=torch.bool)
    for q, out in enumerate(edges):
        for _, r in out:
            successors[q, r] = True
    live = torch.zeros(num_states, dtype=torch.bool)
    live[done] = True
    while True:
        grown = live | (successors & live.unsqueeze(0)).any(1)
        if torch.equal(grown, live):
            break
        live = grown
    return TokenAutomaton(
        num_states=num_states,
        vocab_size=tok.vocab_size,
        initial_state=dense[index.get_initial_state()],
        done_state=done,
        end_token_id=tok.end_id,
        final=final,
        offsets=torch.tensor(offsets, dtype=torch.int64),
        tokens=torch.tensor(tokens, dtype=torch.int32),
        next_states=torch.tensor(nexts, dtype=torch.int32),
        successors=successors,
        live=live,
    )


@pytest.fixture(scope="session")
def build_automaton(tokenizer: Tokenizer) -> Callable[[str], TokenAutomaton]:
    """regex → TokenAutomaton over the test tokenizer, with the engine's builder."""
    from agentflow.engine.constraints.index import build_token_automaton

    return lambda regex: build_token_automaton(regex, tokenizer)[0]
