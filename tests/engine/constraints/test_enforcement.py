"""In-step enforcement: sweeps, fast path, one-by-one commits, jump-forward, infeasibility, AR use."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch

from agentflow.engine.constraints.automaton import TokenAutomaton
from agentflow.engine.constraints.enforcement import Constraint, ConstraintSession
from agentflow.engine.constraints.protocol import DecodeConstraint
from agentflow.engine.errors import InfeasibleConstraintError
from agentflow.engine.speculative import greedy_pick
from agentflow.engine.tokenizer import Tokenizer
from agentflow.kernels import unpack_bits

Build = Callable[[str], TokenAutomaton]

TOOL_CALL = r'\{"name":"(get_order|search)","arguments":\{"order_id":[0-9]{1,5}\}\}'
TEXT_FIELD = r'\{"city":"[a-z ]{0,12}","ok":(true|false)\}'


@pytest.fixture
def constrain(build_automaton: Build, tokenizer: Tokenizer) -> Callable[[str], Constraint]:
    return lambda regex: Constraint(build_automaton(regex), tokenizer)


def _masks(tokenizer: Tokenizer, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    assert tokenizer.mask_id is not None
    return torch.full((length,), tokenizer.mask_id), torch.ones(length, dtype=torch.bool)


def _decode_diffusion(
    session: ConstraintSession,
    vocab: int,
    *,
    block: int,
    max_tokens: int,
    temperature: float,
    seed: int,
    per_step: int = 3,
    device: torch.device | str = "cpu",
) -> list[int]:
    """A minimal block-diffusion driver with random logits (the sampler's step protocol)."""
    g = torch.Generator().manual_seed(seed)
    out: list[int] = []
    mask_id = 1
    while len(out) < max_tokens and not session.done:
        length = min(block, max_tokens - len(out))
        tokens = torch.full((length,), mask_id)
        masked = torch.ones(length, dtype=torch.bool)
        step = 0
        while True:
            session.jump_forward(tokens, masked)
            if not bool(masked.any()):
                break
            # wider than the vocab: extra columns are never allowed
            logits = (torch.randn(length, vocab + 5, generator=g) * 4).to(device)
            prop, conf = session.propose(tokens, masked, logits, temperature=temperature, seed=step)
            positions = torch.nonzero(masked).flatten().tolist()
            order = sorted(positions, key=lambda i: -float(conf[i]))[:per_step]
            done = session.commit(tokens, masked, order, prop, logits, temperature=temperature)
            assert done and all(not bool(masked[i]) for i in done)
            step += 1
        session.finish_block(tokens)
        out += tokens.tolist()
    return out


def _text(tokenizer: Tokenizer, ids: list[int]) -> str:
    end = tokenizer.end_id
    return tokenizer.decode(ids[: ids.index(end)] if end in ids else ids)


def test_session_implements_the_protocol(constrain: Callable[[str], Constraint]) -> None:
    assert isinstance(constrain(TOOL_CALL).session(), DecodeConstraint)


@pytest.mark.parametrize("regex", [TOOL_CALL, TEXT_FIELD])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_random_logits_always_produce_matching_text(
    regex: str, temperature: float, constrain: Callable[[str], Constraint], tokenizer: Tokenizer
) -> None:
    constraint = constrain(regex)
    for seed in range(3):
        session = constraint.session(max_tokens=40)
        ids = _decode_diffusion(
            session,
            tokenizer.vocab_size,
            block=8,
            max_tokens=40,
            temperature=temperature,
            seed=seed,
        )
        assert session.done
        assert re.fullmatch(regex, _text(tokenizer, ids)), _text(tokenizer, ids)
        end = ids.index(tokenizer.end_id)
        assert all(t == tokenizer.end_id for t in ids[end:])  # DONE only takes the end token


def test_budget_forces_completion_in_time(
    constrain: Callable[[str], Constraint], tokenizer: Tokenizer
) -> None:
    constraint = constrain(TEXT_FIELD)
    shortest = int(constraint.distance[constraint.automaton.initial_state])
    for budget in (shortest, shortest + 3):
        session = constraint.session(max_tokens=budget)
        ids = _decode_diffusion(
            session, tokenizer.vocab_size, block=4, max_tokens=budget, temperature=1.0, seed=budget
        )
        assert len(ids) <= budget and session.done
        assert re.fullmatch(TEXT_FIELD, _text(tokenizer, ids))
    with pytest.raises(InfeasibleConstraintError):
        session = constraint.session(max_tokens=shortest - 1)
        tokens, masked = _masks(tokenizer, shortest - 1)
        session.propose(tokens, masked, torch.zeros(shortest - 1, tokenizer.vocab_size))


def test_fast_path_keeps_the_models_allowed_pick(
    constrain: Callable[[str], Constraint], tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentflow.kernels.automaton_sweep_host import BlockSweep

    session = constrain(TEXT_FIELD).session()
    tokens, masked = _masks(tokenizer, 1)
    first = tokenizer.encode('{"')[0]
    logits = torch.zeros(1, tokenizer.vocab_size)
    logits[0, first] = 5.0
    calls: list[int] = []
    real = BlockSweep.allowed

    def counting(self: BlockSweep, pos: int) -> object:
        calls.append(pos)
        return real(self, pos)

    monkeypatch.setattr(BlockSweep, "allowed", counting)
    prop, conf = session.propose(tokens, masked, logits)
    assert int(prop[0]) == first
    assert calls == []  # the model's own pick was allowed: no mask was built
    assert float(conf[0]) == pytest.approx(float(torch.softmax(logits[0], 0)[first]))
    logits[0, first] = -5.0  # now the argmax is forbidden: a mask is built for that row
    prop, conf = session.propose(tokens, masked, logits)
    assert calls == [0]
    assert tokenizer.decode([int(prop[0])]) in ("{", '{"')
    assert 0 < float(conf[0]) <= 1


def test_commits_one_by_one_and_skips_contradicting_proposals(
    build_automaton: Build, tokenizer: Tokenizer
) -> None:
    a_id, b_id = tokenizer.encode("a")[0], tokenizer.encode("b")[0]
    session = Constraint(build_automaton("(ab|ba)"), tokenizer).session()
    tokens, masked = _masks(tokenizer, 3)
    masked[2] = True
    logits = torch.full((3, tokenizer.vocab_size), -10.0)
    logits[0, a_id] = 3.0  # "a" at 0 alone is fine (ab)
    logits[1, a_id] = 2.0  # "a" at 1 alone is fine (ba), but not together with "a" at 0
    prop, _ = session.propose(tokens, masked, logits)
    assert prop[:2].tolist() == [a_id, a_id]
    done = session.commit(tokens, masked, [0, 1], prop, logits)
    assert done == [0]
    assert tokens[0] == a_id and bool(masked[1])
    prop, _ = session.propose(tokens, masked, logits)
    assert int(prop[1]) == b_id  # re-proposed from the logits under the new sweep


def test_commit_repicks_when_the_only_proposal_is_invalid(
    build_automaton: Build, tokenizer: Tokenizer
) -> None:
    a_id, b_id = tokenizer.encode("a")[0], tokenizer.encode("b")[0]
    session = Constraint(build_automaton("ab"), tokenizer).session()
    tokens, masked = _masks(tokenizer, 3)
    logits = torch.zeros(3, tokenizer.vocab_size)
    logits[0, b_id] = 9.0
    proposal = torch.tensor([b_id, b_id, b_id])  # stale: "b" cannot start the answer
    done = session.commit(tokens, masked, [0], proposal, logits)
    assert done == [0] and int(tokens[0]) == a_id


TWO_KEYS = r'\{"a":"[^"]{0,8}","b":"[^"]{0,8}"\}'


def _one_token(tokenizer: Tokenizer, text: str) -> int:
    ids = tokenizer.encode(text)
    assert len(ids) == 1, f"{text!r} is not one token of the test tokenizer"
    return ids[0]


def test_refused_pick_closes_the_string_instead_of_writing_structure_into_it(
    constrain: Callable[[str], Constraint], tokenizer: Tokenizer
) -> None:
    # The model means to close the string and the call ("}}]}), but key "b" is still
    # required: the re-pick closes the string (") instead of writing }}]} into it.
    session = constrain(TWO_KEYS).session()
    ids = tokenizer.encode('{"a":"x')
    tokens, masked = _masks(tokenizer, len(ids) + 8)
    tokens[: len(ids)], masked[: len(ids)] = torch.tensor(ids), False
    pos = len(ids)
    logits = torch.zeros(len(tokens), tokenizer.vocab_size)
    logits[pos, _one_token(tokenizer, '"}}]}')] = 9.0
    logits[pos, _one_token(tokenizer, "}")] = 5.0  # the best allowed token by the logits
    logits[pos, _one_token(tokenizer, '"')] = 1.0
    prop, conf = session.propose(tokens, masked, logits)
    assert tokenizer.decode([int(prop[pos])]) == '"'
    assert 0.0 < float(conf[pos]) < 0.1  # its probability among the allowed tokens


def test_autoregressive_greedy_pick_keeps_the_refused_tokens_intent(
    constrain: Callable[[str], Constraint], tokenizer: Tokenizer
) -> None:
    # The AR decoder, the hybrid drafter and the verifier share this rule, so greedy
    # hybrid output stays the AR model's own.
    session = constrain(r'\{"a":"[^"]{0,8}"\}\}\]\}').session()
    session.advance(tokenizer.encode('{"a":"x'))
    logits = torch.zeros(tokenizer.vocab_size)
    logits[_one_token(tokenizer, '",')] = 9.0  # refused: no second key
    logits[_one_token(tokenizer, "}")] = 5.0  # allowed (inside the string), other intent
    logits[_one_token(tokenizer, '"}}]}')] = 4.0  # closes the string: what '",' began
    logits[_one_token(tokenizer, '"')] = 2.0
    mask = session.next_token_mask()
    picked = greedy_pick(logits, mask, None, session.refused_pick)
    assert tokenizer.decode([picked]) == '"}}]}'
    assert tokenizer.decode([greedy_pick(logits, mask)]) == "}"  # the plain masked argmax


def test_refused_greedy_pick_at_the_forced_boundary_takes_the_forced_token(
    constrain: Callable[[str], Constraint], tokenizer: Tokenizer
) -> None:
    # Jump-forward leaves '":' to the model (the longer '":"' or '":[' may follow);
    # when the model's pick there is refused, the forced text's own token is taken.
    session = constrain(r'\{"status":("[a-z]{1,8}"|\[[0-9]\])\}').session()
    tokens, masked = _masks(tokenizer, 12)
    filled = session.jump_forward(tokens, masked)
    assert tokenizer.decode(tokens[:filled].tolist()) == '{"status'
    logits = torch.zeros(len(tokens), tokenizer.vocab_size)
    logits[filled, _one_token(tokenizer, "order")] = 9.0  # refused: the key is not closed
    logits[filled, _one_token(tokenizer, '"')] = 5.0  # allowed, but splits the forced text
    prop, _ = session.propose(tokens, masked, logits)
    assert tokenizer.decode([int(prop[filled])]) == '":'
    # Sampling keeps the masked distribution (the hybrid acceptance rule relies on it).
    hot = logits.clone()
    hot[filled, _one_token(tokenizer, '"')] = 30.0
    prop, _ = session.propose(tokens, masked, hot, temperature=1.0, seed=0)
    assert tokenizer.decode([int(prop[filled])]) == '"'


def test_refused_pick_at_the_boundary_may_take_a_longer_structural_token(
    constrain: Callable[[str], Constraint], tokenizer: Tokenizer
) -> None:
    # The tokenizer writes '":"' where a string value opens: when the model scores
    # it over the held-back '":', the text is split as it would be written.
    session = constrain(r'\{"status":("[a-z]{1,8}"|\["[a-z]{1,8}"\])\}').session()
    tokens, masked = _masks(tokenizer, 12)
    filled = session.jump_forward(tokens, masked)
    assert tokenizer.decode(tokens[:filled].tolist()) == '{"status'
    logits = torch.zeros(len(tokens), tokenizer.vocab_size)
    logits[filled, _one_token(tokenizer, "order")] = 9.0  # refused
    logits[filled, _one_token(tokenizer, '":"')] = 3.0
    logits[filled, _one_token(tokenizer, '":')] = 2.0
    prop, _ = session.propose(tokens, masked, logits)
    assert tokenizer.decode([int(prop[filled])]) == '":"'


def test_jump_forward_fills_canonical_forced_tokens(
    constrain: Callable[[str], Constraint], tokenizer: Tokenizer
) -> None:
    session = constrain(TOOL_CALL).session()
    tokens, masked = _masks(tokenizer, 16)
    filled = session.jump_forward(tokens, masked)
    forced_ids = tokens[:filled].tolist()
    assert filled > 0 and not bool(masked[:filled].any()) and bool(masked[filled:].all())
    text = tokenizer.decode(forced_ids)
    assert '{"name":"'.startswith(text) and len(text) >= len('{"name')
    assert forced_ids == tokenizer.encode(text)  # the canonical tokenization


def test_forced_tokens_never_split_a_token_the_continuation_merges(
    constrain: Callable[[str], Constraint], tokenizer: Tokenizer
) -> None:
    # '"}}]' is forced after the value, then '}' or '9'. On its own the forced text is
    # tokenized '"}}', ']', but with the '}' that may follow it is the single token
    # '"}}]}': forcing '"}}' would put the model on a tokenization it never saw (after
    # '"}' the embedded AR model went on with another call). Forced tokens must start
    # every continuation's own tokens.
    regex = r'\{"a":"xy"\}\}\](\}|9)'
    endings = ["}", "9"]
    assert tokenizer.encode('"}}]}') == [_one_token(tokenizer, '"}}]}')]
    session = constrain(regex).session()
    session.advance(tokenizer.encode('{"a":"'))
    forced = session.forced_tokens()
    assert tokenizer.decode(forced) == "xy"
    for ending in endings:
        assert tokenizer.encode('xy"}}]' + ending)[: len(forced)] == forced
    # The same in a block (jump-forward), which diffusion and the hybrid drafts use.
    block = constrain(regex).session()
    tokens, masked = _masks(tokenizer, 16)
    filled = block.jump_forward(tokens, masked)
    assert tokenizer.decode(tokens[:filled].tolist()) == '{"a":"xy'
    for ending in endings:
        assert tokenizer.encode('{"a":"xy"}}]' + ending)[:filled] == tokens[:filled].tolist()


def test_jump_forward_stops_at_fixed_tokens_and_respects_room(
    constrain: Callable[[str], Constraint], tokenizer: Tokenizer
) -> None:
    session = constrain(TOOL_CALL).session()
    tokens, masked = _masks(tokenizer, 6)
    masked[1] = False
    tokens[1] = tokenizer.encode('{"name')[1]
    filled = session.jump_forward(tokens, masked)
    assert filled >= 1  # position 0 is forced and must agree with the fixed token at 1
    assert tokenizer.decode(tokens[:2].tolist()) == '{"name'


def test_done_forces_end_tokens(
    constrain: Callable[[str], Constraint], tokenizer: Tokenizer
) -> None:
    session = constrain("ok").session()
    session.advance([*tokenizer.encode("ok"), tokenizer.end_id])  # type: ignore[list-item]
    assert session.done
    tokens, masked = _masks(tokenizer, 5)
    assert session.jump_forward(tokens, masked) == 5
    assert tokens.tolist() == [tokenizer.end_id] * 5


def test_infeasible_block_is_reported(
    constrain: Callable[[str], Constraint], tokenizer: Tokenizer
) -> None:
    session = constrain(TEXT_FIELD).session()
    tokens, masked = _masks(tokenizer, 4)
    masked[0] = False
    tokens[0] = tokenizer.encode("}")[0]  # cannot start the object
    with pytest.raises(InfeasibleConstraintError, match="no completion of this block"):
        session.propose(tokens, masked, torch.zeros(4, tokenizer.vocab_size))
    with pytest.raises(InfeasibleConstraintError):
        session.jump_forward(tokens, masked)


def test_autoregressive_mask_forced_tokens_and_rollback(
    constrain: Callable[[str], Constraint], tokenizer: Tokenizer
) -> None:
    constraint = constrain(TEXT_FIELD)
    automaton = constraint.automaton
    session = constraint.session()
    forced = session.forced_tokens()
    assert tokenizer.decode(forced) and '{"city":"'.startswith(tokenizer.decode(forced))
    session.advance(tokenizer.encode('{"city":"'))
    snap = session.checkpoint()
    allowed = unpack_bits(session.next_token_mask(), tokenizer.vocab_size)
    expect = [
        t
        for t in range(tokenizer.vocab_size)
        if (r := automaton.step(session.state, t)) >= 0 and bool(automaton.live[r])
    ]
    assert torch.nonzero(allowed).flatten().tolist() == expect
    assert bool(allowed[tokenizer.encode("p")[0]])
    assert not bool(allowed[tokenizer.encode("}")[0]])
    session.advance(tokenizer.encode("paris"))
    with pytest.raises(InfeasibleConstraintError, match="not allowed"):
        session.advance(tokenizer.encode("}"))
    session.rollback(snap)
    session.advance(tokenizer.encode('nice","ok":true}'))
    assert session.forced_tokens() == [tokenizer.end_id]
    session.advance([tokenizer.end_id])  # type: ignore[list-item]
    assert session.done and session.forced_tokens() == []


def test_bad_inputs_are_named(constrain: Callable[[str], Constraint], tokenizer: Tokenizer) -> None:
    session = constrain(TEXT_FIELD).session()
    tokens, masked = _masks(tokenizer, 4)
    with pytest.raises(ValueError, match="logits must be"):
        session.propose(tokens, masked, torch.zeros(4, 3))
    with pytest.raises(ValueError, match="not a masked position"):
        masked[2] = False
        session.commit(tokens, masked, [2], tokens, torch.zeros(4, tokenizer.vocab_size))
    with pytest.raises(ValueError, match="max_tokens"):
        constrain(TEXT_FIELD).session(max_tokens=0)


@pytest.mark.triton
def test_triton_backend_gives_the_same_answers(
    build_automaton: Build, tokenizer: Tokenizer
) -> None:
    from agentflow.kernels._backend import interpreting

    cuda = torch.cuda.is_available()
    if not cuda and not interpreting():
        pytest.skip("no CUDA device and TRITON_INTERPRET is not set (run via `make test`)")
    automaton = build_automaton(r'\{"ok":(true|false)\}')
    outs = []
    for backend in ("torch", "triton"):
        device = "cuda" if cuda and backend == "triton" else "cpu"
        session = Constraint(automaton.to(device), tokenizer, backend=backend).session(
            max_tokens=12
        )
        outs.append(
            _decode_diffusion(
                session,
                tokenizer.vocab_size,
                block=6,
                max_tokens=12,
                temperature=1.0,
                seed=4,
                device=device,
            )
        )
    assert outs[0] == outs[1]
    assert re.fullmatch(r'\{"ok":(true|false)\}', _text(tokenizer, outs[0]))


def test_allowed_tokens_cut_by_top_p_fall_back_to_a_uniform_pick(
    build_automaton: Build, tokenizer: Tokenizer
) -> None:
    a_id, b_id = tokenizer.encode("a")[0], tokenizer.encode("b")[0]
    session = Constraint(build_automaton("(a|b)c"), tokenizer).session()
    tokens, masked = _masks(tokenizer, 2)
    logits = torch.zeros(2, tokenizer.vocab_size)
    logits[0, [a_id, b_id]] = float("-inf")  # the nucleus kept only forbidden tokens
    for temperature in (0.0, 1.0):
        prop, conf = session.propose(tokens, masked, logits, temperature=temperature, seed=3)
        assert int(prop[0]) in (a_id, b_id)
        assert float(conf[0]) == pytest.approx(0.5)
