"""The decoders driving the real ConstraintSession: forced tokens, stats, batching."""

from __future__ import annotations

import json
from collections.abc import Callable

import jsonschema
import pytest

from agentflow.engine.autoregressive import ARDecoder
from agentflow.engine.constraints.automaton import TokenAutomaton
from agentflow.engine.constraints.enforcement import Constraint
from agentflow.engine.constraints.schema import compile_json_schema
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.sampler import DiffusionEngine
from agentflow.engine.tokenizer import Tokenizer

SCHEMA = {
    "type": "object",
    "properties": {"name": {"const": "get_order"}, "id": {"type": "string", "maxLength": 5}},
    "required": ["name", "id"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def constraint(
    build_automaton: Callable[[str], TokenAutomaton], tokenizer: Tokenizer
) -> Constraint:
    return Constraint(build_automaton(compile_json_schema(SCHEMA).regex), tokenizer)


@pytest.mark.parametrize("mode", ["diffusion", "ar"])
def test_constrained_rows_validate_count_forced_tokens_and_batch_like_singles(
    mode: str, constraint: Constraint, tokenizer: Tokenizer, model_factory
) -> None:
    attention = "block" if mode == "diffusion" else "causal"
    model = model_factory(attention, vocab_size=tokenizer.vocab_size, seed=5)
    engine = DiffusionEngine(model) if mode == "diffusion" else ARDecoder(model)
    config = GenerationConfig(max_new_tokens=40, block_length=8, steps=8)
    prompts = [tokenizer.encode("Find order 58213"), tokenizer.encode("hi"), tokenizer.encode("x")]
    sessions = [constraint.session(40), None, constraint.session(40)]
    batch = engine.generate(prompts, config, constraints=sessions)
    for i in (0, 2):
        text = tokenizer.decode(batch.sequences[i], skip_special=True)
        value = json.loads(text)
        jsonschema.validate(value, SCHEMA)
        row = batch.stats.rows[i]
        # '{"name":"get_order","id":"' is forced by the schema: filled without the model.
        assert row.forced_tokens >= len(tokenizer.encode('{"name":"get_order","id":"')) - 1
        assert row.forced_tokens <= row.tokens and row.finished
        assert sessions[i].done  # type: ignore[union-attr]
        single = engine.generate([prompts[i]], config, constraints=[constraint.session(40)])
        assert single.sequences[0] == batch.sequences[i]
        assert single.stats.rows[0].forced_tokens == row.forced_tokens
    plain = engine.generate([prompts[1]], config)
    assert batch.sequences[1] == plain.sequences[0]
    assert batch.stats.forced_tokens == sum(r.forced_tokens for r in batch.stats.rows)
