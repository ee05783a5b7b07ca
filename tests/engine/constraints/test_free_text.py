"""Free text under a constraint: which states are free text, and ``text_threshold``."""

from __future__ import annotations

import json
from collections.abc import Callable

import jsonschema
import pytest
import torch

from agentflow.engine.constraints.automaton import TokenAutomaton
from agentflow.engine.constraints.enforcement import Constraint
from agentflow.engine.constraints.schema import compile_json_schema
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.sampler import DiffusionEngine
from agentflow.engine.tokenizer import Tokenizer

SCHEMA = {
    "type": "object",
    "properties": {
        "note": {"type": "string", "minLength": 8, "maxLength": 24},
        "level": {"enum": ["low", "high"]},
        "n": {"type": "integer"},
    },
    "required": ["note", "level", "n"],
    "additionalProperties": False,
}
TARGET = '{"note":"hello world","level":"low","n":3}'
MASK = 1


@pytest.fixture(scope="module")
def constraint(
    build_automaton: Callable[[str], TokenAutomaton], tokenizer: Tokenizer
) -> Constraint:
    return Constraint(build_automaton(compile_json_schema(SCHEMA).regex), tokenizer)


def _state_after(constraint: Constraint, tokenizer: Tokenizer, text: str) -> int:
    session = constraint.session()
    session.advance(tokenizer.encode(text))
    return session.state


def test_only_open_strings_are_free_text(constraint: Constraint, tokenizer: Tokenizer) -> None:
    def free(text: str) -> bool:
        return constraint.free_text(_state_after(constraint, tokenizer, text))

    assert free('{"note":"') and free('{"note":"hello')
    assert not free("{")  # a key comes next
    assert not free('{"note":"hello world","level":"')  # an enum value
    assert not free('{"note":"hello world","level":"low","n":')  # a number
    assert not free('{"note":"hello world"')  # after the closing quote


def _row(tokenizer: Tokenizer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    target = tokenizer.encode(TARGET)
    length = len(target) + 4
    proposal = torch.tensor(target + [tokenizer.end_id] * 4)
    tokens = torch.full((length,), MASK, dtype=torch.long)
    return tokens, torch.ones(length, dtype=torch.bool), proposal


def test_commit_stops_at_an_unsure_token_inside_free_text(
    constraint: Constraint, tokenizer: Tokenizer
) -> None:
    tokens, masked, proposal = _row(tokenizer)
    length = tokens.shape[0]
    logits = torch.zeros(length, tokenizer.vocab_size)
    session = constraint.session()
    head = len(tokenizer.encode('{"note":"'))
    sure = torch.ones(length)
    unsure = torch.full((length,), 0.95)
    # Without the knob the whole confident run commits at once.
    done = constraint.session().commit(
        tokens.clone(), masked.clone(), list(range(length)), proposal, logits
    )
    assert len(done) == length
    # With it, the run stops at the note's first token (the step's first commit is exempt).
    done = session.commit(
        tokens,
        masked,
        list(range(length)),
        proposal,
        logits,
        confidence=unsure,
        text_threshold=0.99,
    )
    assert done == list(range(head))
    assert session.in_text(tokens, masked, head) and not session.in_text(tokens, masked, 0)
    # The next step commits one token of the note, then stops again.
    rest = list(range(head, length))
    done = session.commit(
        tokens, masked, rest, proposal, logits, confidence=unsure, text_threshold=0.99
    )
    assert done == [head]
    # Sure text commits; the token that closes it is held too (ending a copied value is
    # part of copying it)...
    target = proposal.tolist()
    closing = next(k for k in range(length) if '"' in tokenizer.decode(target[head : k + 1]))
    confidence = torch.where(torch.arange(length) < closing, sure, torch.full((length,), 0.5))
    done = session.commit(
        tokens,
        masked,
        list(range(head + 1, length)),
        proposal,
        logits,
        confidence=confidence,
        text_threshold=0.99,
    )
    assert done == list(range(head + 1, closing))
    # ...while the structure after it (the enum, the number, the end) commits at any
    # confidence: only positions inside free text are held back.
    rest = list(range(closing, length))
    done = session.commit(
        tokens, masked, rest, proposal, logits, confidence=confidence, text_threshold=0.99
    )
    assert done == rest
    assert tokenizer.decode(tokens.tolist(), skip_special=True) == TARGET


def test_text_threshold_slows_only_free_text_and_output_stays_valid(
    constraint: Constraint, tokenizer: Tokenizer, model_factory
) -> None:
    model = model_factory("block", vocab_size=tokenizer.vocab_size, seed=3)
    engine = DiffusionEngine(model)
    prompt = [tokenizer.encode("write a note")]
    base = GenerationConfig(
        max_new_tokens=48, block_length=16, steps=16, threshold=0.0, order="prefix"
    )
    loose = engine.generate(prompt, base, constraints=[constraint.session(48)])
    # A threshold nothing is under changes nothing.
    zero = GenerationConfig(**{**base.__dict__, "text_threshold": 0.0})
    same = engine.generate(prompt, zero, constraints=[constraint.session(48)])
    assert same.sequences == loose.sequences and same.stats.nfe == loose.stats.nfe
    strict = GenerationConfig(**{**base.__dict__, "text_threshold": 1.0})
    session = constraint.session(48)
    slow = engine.generate(prompt, strict, constraints=[session])
    value = json.loads(tokenizer.decode(slow.sequences[0], skip_special=True))
    jsonschema.validate(value, SCHEMA)
    assert session.done
    # At most one token inside the note per pass.
    walk = constraint.session()
    text_tokens = 0
    for token in slow.sequences[0]:
        text_tokens += constraint.free_text(walk.state)
        walk.advance([token])
    assert text_tokens >= 4 and slow.stats.nfe >= text_tokens > loose.stats.nfe
    # The steps cap still holds: two steps per block, whatever the text.
    capped = GenerationConfig(**{**strict.__dict__, "steps": 2})
    fast = engine.generate(prompt, capped, constraints=[constraint.session(48)])
    blocks = -(-len(fast.sequences[0]) // capped.block_length)
    assert fast.stats.nfe <= 2 * blocks


def test_text_threshold_is_checked() -> None:
    with pytest.raises(ValueError, match="text_threshold"):
        GenerationConfig(text_threshold=1.5)
