"""Token automata built from outlines-core's index for a real byte-level tokenizer."""

from __future__ import annotations

import torch

from agentflow.engine.constraints import (
    ConstraintCompiler,
    build_token_automaton,
    compile_json_schema,
)
from agentflow.engine.constraints.automaton import TokenAutomaton
from agentflow.engine.tokenizer import Tokenizer

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 1, "maximum": 999},
        "ok": {"type": "boolean"},
    },
    "required": ["id"],
}


def walk(automaton: TokenAutomaton, ids: list[int]) -> int:
    state = automaton.initial_state
    for t in ids:
        state = automaton.step(state, t)
        if state < 0:
            return -1
    return state


def test_automaton_accepts_exactly_the_schema_language(tokenizer: Tokenizer) -> None:
    regex = compile_json_schema(SCHEMA).regex
    automaton, stats = build_token_automaton(regex, tokenizer)
    assert stats.num_states == automaton.num_states and stats.index_seconds > 0
    end = tokenizer.end_id
    assert end is not None
    for text in ['{"id":58}', '{"id":1,"ok":false}', '{"id":999}']:
        state = walk(automaton, tokenizer.encode(text))
        assert state >= 0 and bool(automaton.final[state]), text
        done = automaton.step(state, end)
        assert done == automaton.done_state and automaton.step(done, end) == done
    for text in ['{"id":0}', '{"id":1000}', '{"ok":true}', '{"id":5,"id":6}']:
        state = walk(automaton, tokenizer.encode(text))
        assert state < 0 or not bool(automaton.final[state]), text
    # Half-way states are not final, so the end token is not allowed there.
    mid = walk(automaton, tokenizer.encode('{"id":'))
    assert mid >= 0 and not bool(automaton.final[mid]) and automaton.step(mid, end) == -1


def test_special_tokens_never_appear_inside_the_answer(tokenizer: Tokenizer) -> None:
    automaton, _ = build_token_automaton(compile_json_schema({"type": "string"}).regex, tokenizer)
    specials = set(tokenizer.special_ids) - {tokenizer.end_id}
    assert specials and not specials & set(automaton.tokens.tolist())


def test_tensor_layout_is_consistent(tokenizer: Tokenizer) -> None:
    automaton, _ = build_token_automaton(compile_json_schema(SCHEMA).regex, tokenizer)
    s, v = automaton.num_states, automaton.vocab_size
    assert (
        automaton.offsets.shape == (s + 1,)
        and int(automaton.offsets[-1]) == automaton.tokens.numel()
    )
    assert automaton.table is not None and automaton.table.shape == (s, v)
    succ = torch.zeros(s, s, dtype=torch.bool)
    for q in range(s):
        lo, hi = int(automaton.offsets[q]), int(automaton.offsets[q + 1])
        toks = automaton.tokens[lo:hi]
        assert bool((toks[1:] > toks[:-1]).all()), "tokens sorted within a state"
        expected = torch.full((v,), -1, dtype=torch.int32)
        expected[toks.long()] = automaton.next_states[lo:hi]
        assert torch.equal(automaton.table[q], expected)
        succ[q, automaton.next_states[lo:hi].long()] = True
    assert torch.equal(succ, automaton.successors)
    assert bool(automaton.live.all()), "every state of an outlines index can still finish"
    assert automaton.initial_state == 0 and bool(automaton.final[automaton.done_state])


def test_compiler_caches_by_schema_and_tokenizer(tokenizer: Tokenizer) -> None:
    compiler = ConstraintCompiler(max_entries=2)
    first = compiler.compile_schema(SCHEMA, tokenizer)
    again = compiler.compile_schema(dict(SCHEMA), tokenizer)
    assert not first.stats.cached and again.stats.cached
    assert again.automaton is first.automaton and compiler.hits == 1
    assert first.schema is not None and first.stats.schema_seconds > 0
    compiler.compile_schema({"type": "integer"}, tokenizer)
    compiler.compile_regex("(?:true|false)", tokenizer)
    assert len(compiler) == 2  # least recently used entry evicted
    assert not compiler.compile_schema(SCHEMA, tokenizer).stats.cached


def test_states_are_numbered_breadth_first_in_token_order(tokenizer: Tokenizer) -> None:
    # Deterministic ids: the same schema gives the same automaton in every run.
    automaton, _ = build_token_automaton(compile_json_schema(SCHEMA).regex, tokenizer)
    seen, queue = [0], [0]
    while queue:
        q = queue.pop(0)
        lo, hi = int(automaton.offsets[q]), int(automaton.offsets[q + 1])
        pairs = zip(
            automaton.tokens[lo:hi].tolist(), automaton.next_states[lo:hi].tolist(), strict=True
        )
        for t, r in pairs:
            if t != automaton.end_token_id and r not in seen:
                seen.append(r)
                queue.append(r)
    assert seen == list(range(automaton.done_state))
