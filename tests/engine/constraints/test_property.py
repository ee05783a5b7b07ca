"""Property: under the constraint, a random-weight model always writes valid JSON for the schema.

Random schemas (hypothesis) → ``compile_json_schema`` → token automaton →
:class:`Constraint`; a tiny random Transformer decodes in block-diffusion mode
and in autoregressive mode; every text must parse and validate with jsonschema.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentflow.engine.autoregressive import ARDecoder
from agentflow.engine.constraints.automaton import TokenAutomaton
from agentflow.engine.constraints.enforcement import Constraint
from agentflow.engine.constraints.schema import compile_json_schema
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.model import AttentionMode, ModelConfig, Transformer
from agentflow.engine.sampler import DiffusionEngine
from agentflow.engine.tokenizer import Tokenizer

_LEAVES = st.one_of(
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.builds(
        lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
        st.integers(-40, 40),
        st.integers(0, 300),
    ),
    st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(0, 5)),
    st.lists(
        st.sampled_from(["red", "green", "x y", "ok"]), min_size=1, max_size=3, unique=True
    ).map(lambda values: {"enum": values}),
)
_VALUES = st.one_of(
    _LEAVES,
    st.builds(
        lambda item, n: {"type": "array", "items": item, "maxItems": n}, _LEAVES, st.integers(0, 2)
    ),
)


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    """Small object schemas: 1-3 known properties, some required, no extras."""
    props = draw(
        st.dictionaries(
            st.sampled_from(["id", "name", "city", "ok", "tags"]), _VALUES, min_size=1, max_size=3
        )
    )
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def _model(tokenizer: Tokenizer, attention: AttentionMode, seed: int) -> Transformer:
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size,
        dim=32,
        n_layers=1,
        n_heads=2,
        n_kv_heads=1,
        ffn_dim=64,
        max_seq_len=256,
        attention=attention,
        block_length=8,
        mask_token_id=tokenizer.mask_id,
        end_token_id=tokenizer.end_id,
        pad_token_id=tokenizer.pad_id,
    )
    model = Transformer(config)
    model.init_weights(seed)
    return model.eval()


@pytest.fixture(scope="module")
def engines(tokenizer: Tokenizer) -> tuple[DiffusionEngine, ARDecoder]:
    return (
        DiffusionEngine(_model(tokenizer, "block", 0), tokenizer),
        ARDecoder(_model(tokenizer, "causal", 1), tokenizer),
    )


@pytest.mark.slow
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    schema=schemas(),
    temperature=st.sampled_from([0.0, 1.0]),
    seed=st.integers(0, 2**16),
    canonical=st.booleans(),
)
def test_generated_text_always_validates(
    schema: dict[str, Any],
    temperature: float,
    seed: int,
    canonical: bool,
    engines: tuple[DiffusionEngine, ARDecoder],
    build_automaton: Callable[[str], TokenAutomaton],
    tokenizer: Tokenizer,
) -> None:
    compiled = compile_json_schema(schema)
    constraint = Constraint(build_automaton(compiled.regex), tokenizer)
    shortest = int(constraint.distance[constraint.automaton.initial_state])
    budget = shortest + 24
    config = GenerationConfig(
        max_new_tokens=budget, block_length=8, steps=8, temperature=temperature, seed=seed
    )
    prompt = tokenizer.encode("Answer in JSON:")
    for engine in engines:
        session = constraint.session(max_tokens=budget, canonical=canonical)
        result = engine.generate([prompt], config, constraints=[session])
        text = tokenizer.decode(result.sequences[0], skip_special=True)
        value = json.loads(text)
        jsonschema.validate(value, schema)
        assert session.done, text
