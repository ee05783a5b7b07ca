"""Hybrid decoding: greedy exactness against the verifier, sampled distribution, auto mode, errors."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from engine_testing import FixedAnswer, make_config, make_model
from torch import Tensor

import agentflow.engine.choice_scoring as choice_scoring
import agentflow.engine.constraints.copy_choices as copy_choices
from agentflow.engine.autoregressive import ARDecoder
from agentflow.engine.constraints.copy_choices import number_spans, request_spans
from agentflow.engine.constraints.enforcement import Constraint
from agentflow.engine.constraints.schema import compile_json_schema
from agentflow.engine.errors import InfeasibleConstraintError, TokenizerMismatchError
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.hybrid import DraftLength, HybridEngine, HybridOptions
from agentflow.engine.hybrid_schedule import Scheduler
from agentflow.engine.hybrid_stats import HybridStats
from agentflow.engine.model import Transformer
from agentflow.engine.sampler import DiffusionEngine
from agentflow.engine.speculative import speculative_step
from agentflow.engine.tokenizer import Tokenizer
from agentflow.kernels import pack_bits


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models run far faster on one thread than on a contended pool."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def random_prompts(n: int, vocab: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 9, (n,), generator=g).tolist()
    return [torch.randint(3, vocab, (k,), generator=g).tolist() for k in lengths]


def agreeing_pair(seed: int = 3, **overrides: Any) -> tuple[Transformer, Transformer]:
    """A drafter that shares the verifier's weights and predicts with a one-token shift.

    With one layer, the drafter's first draft token is the verifier's own greedy
    token, so rounds keep part of the draft (the rest of the block is noise).
    """
    verifier = make_model(make_config("causal", n_layers=1, **overrides), seed=seed)
    drafter = Transformer(make_config("block", n_layers=1, logits_shift=1, **overrides))
    drafter.load_state_dict(verifier.state_dict())
    return drafter.eval(), verifier


class ForwardClock:
    """A fake clock for the scheduler: each forward pass of a model advances it by that model's cost."""

    def __init__(
        self, drafter: Transformer, verifier: Transformer, draft_cost: float, verify_cost: float
    ) -> None:
        self.now = 0.0
        drafter.register_forward_hook(lambda *_: self._tick(draft_cost))
        verifier.register_forward_hook(lambda *_: self._tick(verify_cost))

    def _tick(self, seconds: float) -> None:
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def stats_of(result: Any) -> HybridStats:
    assert isinstance(result.stats, HybridStats)
    return result.stats


# -- greedy exactness ----------------------------------------------------------------------------


@pytest.mark.parametrize("block_length", [1, 3, 8])
def test_greedy_hybrid_equals_verifier_greedy(block_length: int) -> None:
    drafter = make_model(make_config("block"), seed=0)
    verifier = make_model(make_config("causal"), seed=1)
    engine, ar = HybridEngine(drafter, verifier), ARDecoder(verifier)
    cfg = GenerationConfig(max_new_tokens=12, block_length=block_length)
    for prompt in random_prompts(5, 96, seed=block_length):
        assert engine.generate(prompt, cfg).sequences[0] == ar.generate(prompt, cfg).sequences[0]


@pytest.mark.parametrize(("draft_steps", "cache_prefix"), [(1, False), (None, False), (None, True)])
def test_greedy_exact_when_drafts_are_partly_kept(
    draft_steps: int | None, cache_prefix: bool
) -> None:
    drafter, verifier = agreeing_pair()
    options = HybridOptions(draft_steps=draft_steps, adaptive=False)  # every round drafts
    engine = HybridEngine(drafter, verifier, options=options)
    ar = ARDecoder(verifier)
    cfg = GenerationConfig(max_new_tokens=20, block_length=6, cache_block_prefix=cache_prefix)
    kept = 0
    for prompt in random_prompts(5, 96, seed=11):
        res = engine.generate(prompt, cfg)
        assert res.sequences[0] == ar.generate(prompt, cfg).sequences[0]
        stats = stats_of(res)
        kept += stats.accepted_tokens
        # Only a last token with no room for a draft is a verifier-only step.
        assert stats.ar_steps <= 1 and stats.draft_rounds + stats.ar_steps == stats.verify_nfe
        if draft_steps == 1:  # a one-step draft costs one drafter pass per round
            assert stats.draft_nfe == stats.draft_rounds
    assert kept > 0  # the acceptance path (cache rollback to a kept prefix) really ran


def test_greedy_exact_with_a_bidirectional_drafter() -> None:
    drafter = make_model(make_config("bidirectional"), seed=4)
    verifier = make_model(make_config("causal"), seed=5)
    engine, ar = HybridEngine(drafter, verifier), ARDecoder(verifier)
    cfg = GenerationConfig(max_new_tokens=10, block_length=4)
    for prompt in random_prompts(4, 96, seed=2):
        assert engine.generate(prompt, cfg).sequences[0] == ar.generate(prompt, cfg).sequences[0]


@pytest.mark.parametrize("jump", [False, True])
def test_greedy_exact_under_a_fixed_answer_constraint(fixed_answer, jump: bool) -> None:
    drafter, verifier = agreeing_pair()
    cfg = GenerationConfig(max_new_tokens=12, block_length=4)
    target = [40, 41, 42, 43, 44, 45]
    res = HybridEngine(drafter, verifier).generate(
        [5, 6, 7], cfg, constraints=[fixed_answer(target, jump=jump)]
    )
    ref = ARDecoder(verifier).generate(
        [5, 6, 7], cfg, constraints=[fixed_answer(target, jump=jump)]
    )
    assert res.sequences == ref.sequences == [target]
    assert res.stats.rows[0].finished
    if jump:  # every token is forced: no draft is needed, the verifier only prefills
        assert res.stats.rows[0].forced_tokens == len(target)


def _load_regex_automaton() -> Callable[..., Any]:
    """The constraint tests' regex → TokenAutomaton builder (outlines_core.Index)."""
    path = Path(__file__).resolve().parent / "constraints" / "conftest.py"
    spec = importlib.util.spec_from_file_location("constraint_fixtures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.automaton_from_regex


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"enum": ["get_order", "get_weather"]},
        "arguments": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "maxLength": 6},
                "qty": {"type": "integer"},
            },
            "required": ["order_id", "qty"],
        },
    },
    "required": ["name", "arguments"],
}


@pytest.fixture(scope="module")
def schema_constraint(hf_tokenizer) -> Constraint:
    tokenizer = Tokenizer(hf_tokenizer)
    compiled = compile_json_schema(SCHEMA)
    return Constraint(_load_regex_automaton()(compiled.regex, tokenizer), tokenizer)


def test_greedy_exact_under_a_json_schema(schema_constraint: Constraint) -> None:
    vocab = schema_constraint.tokenizer.vocab_size
    drafter = make_model(make_config("block", vocab_size=vocab), seed=6)
    verifier = make_model(make_config("causal", vocab_size=vocab), seed=7)
    engine, ar = HybridEngine(drafter, verifier), ARDecoder(verifier)
    cfg = GenerationConfig(max_new_tokens=48, block_length=6)
    for prompt in random_prompts(4, vocab, seed=9):
        res = engine.generate(prompt, cfg, constraints=[schema_constraint.session()])
        ref = ar.generate(prompt, cfg, constraints=[schema_constraint.session()])
        assert res.sequences == ref.sequences
        if res.stats.rows[0].finished:
            text = schema_constraint.tokenizer.decode(res.sequences[0])
            assert set(json.loads(text)) == {"name", "arguments"}
        assert res.stats.forced_tokens == ref.stats.forced_tokens > 0


@pytest.mark.parametrize(
    ("min_close", "within_text"), [(0.0, False), (0.0, True), (0.5, True), (2.0, False)]
)
def test_greedy_exact_with_copy_choices(
    schema_constraint: Constraint,
    min_close: float,
    within_text: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The verifier makes the AR decoder's copy choices (committed, or declined and
    # written token by token), inside free text too, so hybrid output stays its own.
    monkeypatch.setattr(choice_scoring, "COPY_MIN_CLOSE", min_close)
    monkeypatch.setattr(choice_scoring, "WORD_MIN_CLOSE", min_close)
    monkeypatch.setattr(choice_scoring, "NUMBER_MIN_CLOSE", min_close)
    if min_close == 0.0:  # numbers too wherever they open, whatever the first digit's odds
        monkeypatch.setattr(copy_choices, "WORD_MIN_START", 1e-30)
    tokenizer = schema_constraint.tokenizer
    vocab = tokenizer.vocab_size
    drafter = make_model(make_config("block", vocab_size=vocab), seed=6)
    verifier = make_model(make_config("causal", vocab_size=vocab), seed=7)
    engine, ar = HybridEngine(drafter, verifier), ARDecoder(verifier)
    cfg = GenerationConfig(max_new_tokens=48, block_length=6, score_choices=True)
    copied = numbers = 0
    for text in ("where is order 58213?", "track A-77 x 3 please", "get_weather for Oslo", "hi"):
        prompt = tokenizer.encode(text)
        sessions = []
        for _ in range(2):
            sessions.append(schema_constraint.session())
            sessions[-1].copy_from([text], within_text=within_text)
        res = engine.generate(prompt, cfg, constraints=[sessions[0]])
        ref = ar.generate(prompt, cfg, constraints=[sessions[1]])
        assert res.sequences == ref.sequences
        if ref.stats.rows[0].finished:
            arguments = json.loads(tokenizer.decode(ref.sequences[0]))["arguments"]
            copied += arguments["order_id"] in request_spans([text])
            numbers += str(arguments["qty"]) in number_spans([text])
    if min_close == 0.0:
        assert copied >= 3  # every value that fits maxLength 6 is a span of the request
        assert numbers >= 2  # "58213", "3"


def test_forced_tokens_cost_no_forward_pass_and_drafts_are_kept(
    schema_constraint: Constraint,
) -> None:
    """Kept drafts under a real schema: the verifier reuses the draft's masks and forced runs."""
    vocab = schema_constraint.tokenizer.vocab_size
    drafter, verifier = agreeing_pair(seed=8, vocab_size=vocab)
    engine = HybridEngine(drafter, verifier, options=HybridOptions(adaptive=False))
    ar = ARDecoder(verifier)
    cfg = GenerationConfig(max_new_tokens=40, block_length=6)
    kept = 0
    for prompt in random_prompts(3, vocab, seed=4):
        res = engine.generate(prompt, cfg, constraints=[schema_constraint.session()])
        ref = ar.generate(prompt, cfg, constraints=[schema_constraint.session()])
        assert res.sequences == ref.sequences
        st = stats_of(res)
        kept += st.accepted_tokens
        assert st.draft_nfe == st.draft_rounds  # one drafter pass per draft, forced runs included
        # Every verifier pass chooses at least one token (or the end): forced ones ride along.
        assert st.verify_nfe <= st.tokens - st.forced_tokens + 1
    assert kept > 0


# -- scheduling: drafting only while it pays ------------------------------------------------------


def test_scheduler_rule_backoff_and_reset() -> None:
    s = Scheduler(first_interval=2, max_interval=8)
    assert s.drafting_pays() and s.draft_next()  # nothing measured yet: try drafting

    def ar_steps_until_probe() -> int:
        n = 0
        while not s.draft_next():
            s.after_ar_step(1.0)
            n += 1
        return n

    # A request's first draft also prefills the drafter: its time is not a draft's cost.
    s.after_round(2, 4.0, None, cold=True)
    assert s.drafting and s.draft.value is None
    # E[m] = 1.5; c_ar unknown, taken as c_verify: 1.5 * 0.5 > 0.5 + 0.5 is false. The
    # verifier goes alone for interval x (round cost / c_ar) = 2 x (1.0 / 0.5) = 4 steps.
    s.after_round(1, 0.5, 0.5)
    assert not s.drafting and ar_steps_until_probe() == 4
    # A cold probe (a new request) that fails: interval 4, times its cost in steps (c_ar = 1).
    s.after_round(0, 4.0, 0.5, cold=True)
    assert s.interval == 4 and ar_steps_until_probe() == 4 * 5
    s.after_round(0, 0.5, 0.5)
    assert ar_steps_until_probe() == 8
    s.after_round(0, 0.5, 0.5)
    assert ar_steps_until_probe() == 8  # capped
    s.after_round(7, 0.5, 0.5)  # a probe that keeps 6 drafted tokens: E[m] > 3 pays
    assert s.drafting and s.interval == 2 and s.draft_next()
    s.after_round(1, 2.5, 0.5)  # one slow draft does not move the median
    assert s.draft.value == 0.5 and s.drafting
    s.after_round(0, 0.5, 0.5)  # E[m] ~ 1.17: 1.17 * 1 > 0.5 + 0.5 still pays
    assert s.drafting
    s.after_round(0, 0.5, 0.5)  # E[m] ~ 0.58: stop; not a probe, so the interval stays 2
    assert not s.drafting and s.interval == 2 and ar_steps_until_probe() == 2
    s.after_round(0, 0.5, 0.5)  # a failed probe: interval 4, 4 steps until the next one...
    for _ in range(4):
        s.after_ar_step(1.0)
    assert s.draft_next()
    # ...unless it would prefill the drafter (c_cold = 4 s = 3.5 steps more than a draft):
    # then 4 x 4 steps more. A request that is drafting starts drafting only if it pays.
    assert not s.draft_next(cold=True)
    for _ in range(16):
        s.after_ar_step(1.0)
    assert s.draft_next(cold=True)


def test_scheduler_cold_start_needs_a_request_long_enough_to_pay() -> None:
    s = Scheduler()
    s.after_round(3, 4.0, None, cold=True)  # prefill 4 s (with a draft)
    s.after_round(3, 0.5, 0.5)  # E[m] = 3: 3 x c_ar (0.5 assumed) > 1, drafting pays
    s.after_ar_step(1.0)  # c_ar = 1: each model-chosen token saves 1 - (0.5 + 0.5) / 3 = 2/3 s
    s.end_request(4)
    assert s.drafting and s.tokens_per_request == 4
    # An average request has 4 model-chosen tokens: (4 - 0) x 2/3 < 4 - 0.5, no prefill.
    assert not s.cold_start_pays(0)
    s.end_request(20)  # now 12 on average: 12 x 2/3 > 3.5
    assert s.cold_start_pays(0) and s.draft_next(cold=True)
    assert not s.cold_start_pays(11)  # one token left: nothing to save
    # Refused, the request decodes alone and drafting is probed again later.
    assert not s.draft_next(cold=True, chosen=11) and not s.drafting
    for _ in range(s.interval):
        s.after_ar_step(1.0)
    assert s.draft_next()


@pytest.mark.parametrize("draft_cost", [0.0, 10.0])
def test_scheduler_switch_keeps_greedy_exact(draft_cost: float) -> None:
    """Free drafts: every round drafts. Costly drafts: the verifier decodes alone, with probes."""
    drafter, verifier = agreeing_pair()
    clock = ForwardClock(drafter, verifier, draft_cost, 1.0)
    engine = HybridEngine(drafter, verifier, options=HybridOptions(clock=clock))
    ar = ARDecoder(verifier)
    cfg = GenerationConfig(max_new_tokens=60, block_length=6)
    rounds = steps = 0
    for prompt in random_prompts(4, 96, seed=5):
        res = engine.generate(prompt, cfg)
        assert res.sequences[0] == ar.generate(prompt, cfg).sequences[0]
        st = stats_of(res)
        assert st.verify_nfe == st.draft_rounds + st.ar_steps
        assert st.draft_nfe == st.draft_rounds
        assert sum(st.path_tokens.values()) == st.tokens
        assert st.path_tokens["ar"] >= st.ar_steps
        if draft_cost == 0.0:  # the first draft token is always kept: 2+ tokens per round pays
            assert st.ar_steps <= 1  # only the last token, when a draft has no room
        rounds, steps = rounds + st.draft_rounds, steps + st.ar_steps
    if draft_cost > 0.0:
        assert rounds >= 3  # probes kept coming...
        assert steps >= 5 * rounds  # ...ever more rarely
        assert engine.scheduler.interval > engine.options.probe_interval


# -- sampling: the verifier's distribution -------------------------------------------------------


class SubsetConstraint:
    """A toy constraint: tokens in ``allowed`` (and the end token) everywhere; ``follow[t]`` is forced after t."""

    def __init__(self, allowed: set[int], follow: dict[int, int], vocab: int, end_id: int) -> None:
        self.allowed, self.follow, self.vocab, self.end_id = (
            allowed | {end_id},
            follow,
            vocab,
            end_id,
        )
        self.prefix: list[int] = []

    @property
    def done(self) -> bool:
        return bool(self.prefix) and self.prefix[-1] == self.end_id

    def next_token_mask(self) -> Tensor:
        last = self.prefix[-1] if self.prefix else None
        ok = {self.follow[last]} if last in self.follow else self.allowed
        bits = torch.zeros(self.vocab, dtype=torch.bool)
        bits[sorted(ok)] = True
        return pack_bits(bits)

    def forced_tokens(self) -> list[int]:
        last = self.prefix[-1] if self.prefix else None
        return [self.follow[last]] if last in self.follow else []

    def refused_pick(self, token: int, logits: Tensor) -> int | None:
        return None  # the masked argmax

    def advance(self, token_ids: Sequence[int]) -> None:
        for t in token_ids:
            assert bool(self.next_token_mask_bool()[t]), (t, self.prefix)
            self.prefix.append(int(t))

    def next_token_mask_bool(self) -> Tensor:
        last = self.prefix[-1] if self.prefix else None
        ok = {self.follow[last]} if last in self.follow else self.allowed
        return torch.tensor([t in ok for t in range(self.vocab)])

    def checkpoint(self) -> int:
        return len(self.prefix)

    def rollback(self, snapshot: int) -> None:
        del self.prefix[snapshot:]


@torch.no_grad()
def exact_distribution(
    model: Transformer,
    prompt: list[int],
    budget: int,
    temperature: float,
    constraint: Callable[[], SubsetConstraint] | None,
) -> dict[tuple[int, ...], float]:
    """Every output of sampled autoregressive decoding with its probability (full forwards, no cache)."""
    end = model.config.end_token_id
    out: dict[tuple[int, ...], float] = {}

    def walk(seq: list[int], prob: float) -> None:
        c = None
        if constraint is not None:
            c = constraint()
            c.advance(seq)
        if len(seq) >= budget:
            out[tuple(seq)] = out.get(tuple(seq), 0.0) + prob
            return
        logits = model(torch.tensor([prompt + seq]))[0, -1].float() / temperature
        if c is not None:
            logits[~c.next_token_mask_bool()] = float("-inf")
        p = torch.softmax(logits, -1)
        for t in range(p.shape[0]):
            if float(p[t]) == 0.0:
                continue
            if t == end:
                out[tuple(seq)] = out.get(tuple(seq), 0.0) + prob * float(p[t])
                continue
            nxt = [*seq, t]
            if c is not None and t in c.follow and len(nxt) < budget:
                nxt.append(c.follow[t])
            walk(nxt, prob * float(p[t]))

    walk([], 1.0)
    return out


def chi_square_pvalue(
    counts: dict[tuple[int, ...], int], probs: dict[tuple[int, ...], float]
) -> float:
    """Pearson's test of ``counts`` against ``probs``; bins expected under 5 are pooled."""
    n = sum(counts.values())
    assert set(counts) <= set(probs), set(counts) - set(probs)
    bins: list[tuple[float, float]] = []
    pooled_obs = pooled_exp = 0.0
    for key, p in sorted(probs.items(), key=lambda kv: -kv[1]):
        exp, obs = p * n, float(counts.get(key, 0))
        if exp >= 5:
            bins.append((obs, exp))
        else:
            pooled_obs, pooled_exp = pooled_obs + obs, pooled_exp + exp
    if pooled_exp > 0:
        bins.append((pooled_obs, pooled_exp))
    stat = sum((o - e) ** 2 / e for o, e in bins)
    dof = len(bins) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2.0), torch.tensor(stat / 2.0)))


def _counts(sequences: list[list[int]]) -> dict[tuple[int, ...], int]:
    counts: dict[tuple[int, ...], int] = {}
    for s in sequences:
        counts[tuple(s)] = counts.get(tuple(s), 0) + 1
    return counts


@pytest.mark.slow  # ~15 s each on an idle 2-core machine
@pytest.mark.parametrize("schedule", ["always_draft", "switching"])
@pytest.mark.parametrize("constrained", [False, True])
def test_sampled_hybrid_has_the_verifier_distribution(constrained: bool, schedule: str) -> None:
    vocab, samples, prompt, budget = 10, 700, [4, 7, 5], 2
    small = dict(vocab_size=vocab, dim=16, n_layers=1, n_heads=2, n_kv_heads=1, ffn_dim=32)
    drafter = make_model(make_config("block", **small), seed=21, peak=3.0)
    verifier = make_model(make_config("causal", **small), seed=22, peak=3.0)

    def make() -> SubsetConstraint:
        return SubsetConstraint({0, 3, 5, 6, 7, 8}, {3: 9, 6: 4}, vocab, end_id=2)

    factory = make if constrained else None
    cfg = GenerationConfig(max_new_tokens=budget, block_length=budget, temperature=1.0, seed=0)
    if schedule == "always_draft":
        options = HybridOptions(min_draft=budget, adaptive=False)
    else:  # drafting pays only while E[m] > 1.8: requests switch between the two paths
        clock = ForwardClock(drafter, verifier, 0.8, 1.0)
        options = HybridOptions(probe_interval=1, max_probe_interval=1, clock=clock)
    engine = HybridEngine(drafter, verifier, options=options)
    cons = [make() for _ in range(samples)] if constrained else None
    res = engine.generate([prompt] * samples, cfg, constraints=cons)
    counts = _counts(res.sequences)
    assert (
        chi_square_pvalue(counts, exact_distribution(verifier, prompt, budget, 1.0, factory)) > 1e-3
    )
    stats = stats_of(res)
    assert stats.accepted_tokens > samples // 4  # drafts are kept often: q matters, not only p
    if schedule == "switching":
        assert stats.ar_steps > samples // 20 and stats.path_tokens["ar"] > samples // 20
        assert stats.draft_rounds > samples // 4
    # The same counts are rejected against the verifier at another temperature: the test can fail.
    colder = exact_distribution(verifier, prompt, budget, 0.5, factory)
    assert chi_square_pvalue(counts, colder) < 1e-4


def test_speculative_step_rule() -> None:
    p = torch.tensor([0.5, 0.5, 0.0])
    q = torch.tensor([0.25, 0.25, 0.5])
    g = torch.Generator().manual_seed(0)
    assert speculative_step(p, q, 0, g).accepted  # p/q = 2: always kept
    rejected = [speculative_step(p, q, 2, g) for _ in range(50)]
    assert not any(v.accepted for v in rejected)  # p(x) = 0: never kept
    assert {v.token for v in rejected} == {0, 1}  # residual = norm(max(0, p - q))
    with pytest.raises(ValueError, match="probability 0 under its own draft"):
        speculative_step(p, torch.tensor([0.0, 1.0, 0.0]), 0, g)


# -- adaptive draft length, auto mode, errors ------------------------------------------------------


def test_draft_length_follows_acceptance() -> None:
    lengths = DraftLength(initial=8, minimum=2, maximum=16)
    lengths.update(8, 8)
    assert lengths.length == 16
    for _ in range(6):
        lengths.update(lengths.length, 0)
    assert lengths.length == 2
    lengths.update(2, 2)
    assert lengths.length == 4


def test_auto_mode_keeps_confident_diffusion_and_falls_back_otherwise() -> None:
    drafter = make_model(make_config("block"), seed=0)
    verifier = make_model(make_config("causal"), seed=1)
    cfg = GenerationConfig(max_new_tokens=10, block_length=4)
    prompt = [5, 6, 7]
    trusting = HybridEngine(drafter, verifier, options=HybridOptions(min_confidence=0.0))
    auto = trusting.generate(prompt, cfg, mode="auto")
    from agentflow.engine.sampler import DiffusionEngine

    assert auto.sequences == DiffusionEngine(drafter).generate(prompt, cfg).sequences
    assert stats_of(auto).served[0].to_dict() == {
        "mode": "diffusion",
        "reason": "confident",
        "diffusion_tokens": 0,
    }
    doubting = HybridEngine(drafter, verifier, options=HybridOptions(min_confidence=1.0))
    res = doubting.generate(prompt, cfg, mode="auto")
    assert res.sequences == ARDecoder(verifier).generate(prompt, cfg).sequences
    served = stats_of(res).served[0]
    assert served.mode == "hybrid" and served.reason.startswith("low_confidence")
    assert stats_of(res).to_dict()["served"] == [served.to_dict()]


def test_auto_mode_keeps_the_confident_blocks_and_goes_on_in_hybrid() -> None:
    drafter = make_model(make_config("block"), seed=0)
    verifier = make_model(make_config("causal"), seed=1)
    cfg = GenerationConfig(max_new_tokens=16, block_length=4)
    prompt = [9, 8]  # its blocks' lowest confidences fall from the first to the last
    draft = HybridEngine(drafter, verifier, options=HybridOptions(min_confidence=0.0))
    whole = draft.generate(prompt, cfg, mode="auto").sequences[0]
    kept_lengths = set()
    for bound in [i / 200 for i in range(70, 120)]:
        keep = HybridOptions(min_confidence=bound, keep_confident=True)
        engine = HybridEngine(drafter, verifier, options=keep)
        pieces: list[list[int]] = []
        res = engine.generate(
            prompt, cfg, mode="auto", on_block=lambda r, t, into=pieces: into.append(t)
        )
        served, out = stats_of(res).served[0], res.sequences[0]
        if served.mode == "diffusion":
            continue
        k = served.diffusion_tokens
        kept_lengths.add(k)
        assert k % cfg.block_length == 0 and out[:k] == whole[:k]
        rest = ARDecoder(verifier).generate(prompt + out[:k], replace(cfg, max_new_tokens=16 - k))
        assert out[k:] == rest.sequences[0]  # the verifier's own greedy continuation
        assert [t for p in pieces for t in p] == out
        assert stats_of(res).path_tokens["diffusion"] == k
        assert sum(stats_of(res).path_tokens.values()) == stats_of(res).tokens
    assert kept_lengths == {0, 4, 8, 12}  # the higher the bound, the fewer blocks kept

    restart = HybridOptions(min_confidence=0.41, keep_confident=False)  # would keep 12
    res = HybridEngine(drafter, verifier, options=restart).generate(prompt, cfg, mode="auto")
    assert stats_of(res).served[0].diffusion_tokens == 0
    assert res.sequences == ARDecoder(verifier).generate(prompt, cfg).sequences


AUTO_PROMPTS = [[5, 6, 7], [9, 8], [11, 12, 13, 14], [20, 3], [7]]


def test_diffusion_stops_a_row_at_its_first_unsure_block() -> None:
    drafter = make_model(make_config("block"), seed=0)
    cfg = GenerationConfig(max_new_tokens=12, block_length=4)
    engine = DiffusionEngine(drafter)
    plain = engine.generate(AUTO_PROMPTS, cfg)
    stopped = engine.generate(AUTO_PROMPTS, cfg, min_confidence=0.45)
    for r, prompt in enumerate(AUTO_PROMPTS):
        row = stopped.stats.rows[r]
        alone = engine.generate([prompt], cfg, min_confidence=0.45)
        assert alone.sequences[0] == stopped.sequences[r]  # batching changes nothing
        if row.low_confidence is None:
            assert alone.stats.rows[0].low_confidence is None
        else:  # left padding moves the float rounding a little
            assert alone.stats.rows[0].low_confidence == pytest.approx(row.low_confidence, abs=1e-5)
        if row.low_confidence is None:
            assert stopped.sequences[r] == plain.sequences[r]
        else:  # the blocks before the unsure one
            assert row.low_confidence < 0.45
            assert len(stopped.sequences[r]) % cfg.block_length == 0
            assert stopped.sequences[r] == plain.sequences[r][: len(stopped.sequences[r])]
    assert {row.low_confidence is None for row in stopped.stats.rows} == {True, False}
    with pytest.raises(ValueError, match="min_confidence"):
        engine.generate(AUTO_PROMPTS, cfg, min_confidence=1.5)


@pytest.mark.parametrize("keep_confident", [False, True])
def test_auto_mode_decodes_a_batch_as_its_rows_alone(keep_confident: bool) -> None:
    drafter = make_model(make_config("block"), seed=0)
    verifier = make_model(make_config("causal"), seed=1)
    cfg = GenerationConfig(max_new_tokens=12, block_length=4)
    options = HybridOptions(min_confidence=0.45, keep_confident=keep_confident)
    engine = HybridEngine(drafter, verifier, options=options)
    pieces: dict[int, list[int]] = {}
    batch = engine.generate(
        AUTO_PROMPTS,
        cfg,
        mode="auto",
        on_block=lambda r, t: pieces.setdefault(r, []).extend(t),
    )
    served = stats_of(batch).served
    assert {s.mode for s in served} == {"diffusion", "hybrid"}
    singles = [engine.generate([p], cfg, mode="auto") for p in AUTO_PROMPTS]
    for r, single in enumerate(singles):
        assert batch.sequences[r] == single.sequences[0]
        assert served[r] == stats_of(single).served[0]
        assert pieces.get(r, []) == batch.sequences[r]  # settled output, streamed once
    # One diffusion pass serves every row of the batch.
    assert stats_of(batch).draft_nfe < sum(stats_of(s).draft_nfe for s in singles)
    assert sum(stats_of(batch).path_tokens.values()) == stats_of(batch).tokens


def test_an_infeasible_row_of_a_batch_alone_falls_back() -> None:
    drafter, verifier = agreeing_pair()
    target = [30, 31, 32, 33]
    cfg = GenerationConfig(max_new_tokens=8, block_length=4)
    engine = HybridEngine(drafter, verifier, options=HybridOptions(draft_steps=2))
    prompts = [[5, 6], [7, 8], [9, 10]]
    cons = [
        FixedAnswer(target, 2, 96, jump=False),
        BlockInfeasible(target, 2, 96, jump=False),
        FixedAnswer(target, 2, 96, jump=False),
    ]
    res = engine.generate(prompts, cfg, constraints=cons, mode="auto")
    assert res.sequences == [target] * 3
    served = stats_of(res).served
    assert served[1].mode == "hybrid" and served[1].reason.startswith("infeasible: no completion")
    for r in (0, 2):
        alone = engine.generate(
            [prompts[r]], cfg, constraints=[FixedAnswer(target, 2, 96, jump=False)], mode="auto"
        )
        assert served[r] == stats_of(alone).served[0]


class BlockInfeasible(FixedAnswer):
    """A fixed answer whose block-diffusion side reports every block infeasible."""

    def jump_forward(self, tokens: Tensor, masked: Tensor) -> int:
        raise InfeasibleConstraintError("no completion of this block (test)")


def test_infeasible_drafts_fall_back_to_the_verifier_alone() -> None:
    drafter, verifier = agreeing_pair()
    target = [30, 31, 32, 33]
    cfg = GenerationConfig(max_new_tokens=8, block_length=4)
    # Two denoising steps: the block sampler's enforcement (a one-pass draft never asks it).
    engine = HybridEngine(drafter, verifier, options=HybridOptions(draft_steps=2))
    res = engine.generate([5, 6], cfg, constraints=[BlockInfeasible(target, 2, 96, jump=False)])
    assert res.sequences == [target]
    assert stats_of(res).drafted_tokens == 0 and stats_of(res).verify_nfe == len(target) + 1
    auto = engine.generate(
        [5, 6], cfg, constraints=[BlockInfeasible(target, 2, 96, jump=False)], mode="auto"
    )
    assert auto.sequences == [target]
    served = stats_of(auto).served[0]
    assert served.mode == "hybrid" and served.reason.startswith("infeasible: no completion")
    with pytest.raises(InfeasibleConstraintError):  # mode="diffusion" has no fallback
        engine.generate(
            [5, 6], cfg, constraints=[BlockInfeasible(target, 2, 96, jump=False)], mode="diffusion"
        )


@pytest.mark.parametrize("budget", [1, 5])
def test_budget_cuts_the_output_like_the_verifier(fixed_answer, budget: int) -> None:
    drafter, verifier = agreeing_pair()
    cfg = GenerationConfig(max_new_tokens=budget, block_length=4)
    for jump in (False, True):
        target = [40, 41, 42, 43, 44, 45, 46]
        res = HybridEngine(drafter, verifier).generate(
            [[5, 6, 7], [9]], cfg, constraints=[fixed_answer(target, jump=jump), None]
        )
        ref = ARDecoder(verifier).generate(
            [[5, 6, 7], [9]], cfg, constraints=[fixed_answer(target, jump=jump), None]
        )
        assert res.sequences == ref.sequences
        assert [len(s) for s in res.sequences] == [budget, budget]
        assert [r.finished for r in res.stats.rows] == [r.finished for r in ref.stats.rows]


def test_redo_reason_is_reported_and_stats_add_up() -> None:
    drafter, verifier = agreeing_pair()
    res = HybridEngine(drafter, verifier).generate(
        [[5, 6], [9, 8, 7]],
        GenerationConfig(max_new_tokens=12, block_length=4),
        mode="hybrid",
        reason="validation: 'city' is required",
    )
    stats = stats_of(res)
    assert [s.reason for s in stats.served] == ["validation: 'city' is required"] * 2
    assert stats.nfe == stats.draft_nfe + stats.verify_nfe
    assert stats.tokens == sum(len(s) for s in res.sequences)
    assert stats.mean_accepted == stats.accepted_tokens / stats.draft_rounds
    assert stats.verify_nfe == stats.draft_rounds + stats.ar_steps
    assert sum(stats.path_tokens.values()) == stats.tokens


def test_streamed_pieces_add_up_to_the_output() -> None:
    drafter, verifier = agreeing_pair()
    pieces: list[list[int]] = []
    res = HybridEngine(drafter, verifier).generate(
        [5, 6, 7], GenerationConfig(max_new_tokens=16), on_block=lambda r, t: pieces.append(t)
    )
    assert [t for p in pieces for t in p] == res.sequences[0]


def test_tokenizer_mismatch_is_refused(hf_tokenizer) -> None:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models

    other = HFTokenizer(models.WordLevel({"<|pad|>": 0, "<|mask|>": 1, "<|end|>": 2, "a": 3}))
    drafter = make_model(make_config("block"), seed=0)
    verifier = make_model(make_config("causal"), seed=1)
    with pytest.raises(TokenizerMismatchError, match="differs from the drafter's"):
        HybridEngine(
            drafter, verifier, Tokenizer(hf_tokenizer), verifier_tokenizer=Tokenizer(other)
        )


def test_bad_models_and_modes_are_refused() -> None:
    causal = make_model(make_config("causal"), seed=1)
    block = make_model(make_config("block"), seed=0)
    with pytest.raises(ValueError, match="drafter must be a diffusion model"):
        HybridEngine(causal, causal)
    with pytest.raises(ValueError, match="verifier must be autoregressive"):
        HybridEngine(block, make_model(make_config("bidirectional")))
    with pytest.raises(ValueError, match="mode must be"):
        HybridEngine(block, causal).generate([5], mode="ar")  # type: ignore[arg-type]


# -- plumbing: checkpoints and the CLI -------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory, hf_tokenizer) -> dict[str, Path]:
    """A tiny drafter, a verifier with the same tokenizer, and one with another tokenizer."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models

    from agentflow.engine.checkpoints import save_checkpoint

    tok = Tokenizer(hf_tokenizer)
    vocab = tok.vocab_size
    root = tmp_path_factory.mktemp("hybrid")
    out = {
        "dlm": save_checkpoint(
            make_model(make_config("block", vocab_size=vocab), seed=0), tok, root / "dlm"
        ),
        "ar": save_checkpoint(
            make_model(make_config("causal", vocab_size=vocab), seed=1), tok, root / "ar"
        ),
    }
    words = {t: i for i, t in enumerate(["<|pad|>", "<|mask|>", "<|end|>", "a", "b"])}
    other = HFTokenizer(models.WordLevel(words, unk_token="a"))
    foreign = make_model(make_config("causal", vocab_size=vocab), seed=2)
    out["foreign"] = save_checkpoint(foreign, other, root / "foreign")
    return out


def test_cli_hybrid_prints_the_verifier_greedy_text(checkpoints, capsys) -> None:
    from agentflow.cli import main

    def run(*argv: str) -> dict[str, Any]:
        assert (
            main(["generate", "Where is order 58213?", "--json", "--max-new-tokens", "8", *argv])
            == 0
        )
        return json.loads(capsys.readouterr().out)

    hybrid = run(
        "--model", str(checkpoints["dlm"]), "--verifier", str(checkpoints["ar"]), "--mode", "hybrid"
    )
    ar = run("--model", str(checkpoints["ar"]), "--mode", "ar")
    assert hybrid["text"] == ar["text"]
    assert hybrid["stats"]["mode"] == "hybrid"
    auto = run(
        "--model", str(checkpoints["dlm"]), "--verifier", str(checkpoints["ar"]), "--mode", "auto"
    )
    assert auto["stats"]["mode"] in ("diffusion", "hybrid")


def test_from_pretrained_refuses_a_verifier_with_another_tokenizer(checkpoints) -> None:
    engine = HybridEngine.from_pretrained(checkpoints["dlm"], checkpoints["ar"])
    assert engine.generate([5, 6], GenerationConfig(max_new_tokens=4)).stats.tokens > 0
    with pytest.raises(TokenizerMismatchError, match="must use the same tokenizer"):
        HybridEngine.from_pretrained(checkpoints["dlm"], checkpoints["foreign"])


def test_greedy_exact_with_several_end_tokens() -> None:
    free = ARDecoder(make_model(make_config("causal"), seed=1))
    cfg = GenerationConfig(max_new_tokens=12, block_length=4)
    stop = free.generate([5, 6, 7], cfg).sequences[0][3]
    drafter = make_model(make_config("block", extra_end_token_ids=(stop,)), seed=0)
    verifier = make_model(make_config("causal", extra_end_token_ids=(stop,)), seed=1)
    engine, ar = HybridEngine(drafter, verifier), ARDecoder(verifier)
    for prompt in [[5, 6, 7], *random_prompts(4, 96, seed=11)]:
        assert engine.generate(prompt, cfg).sequences[0] == ar.generate(prompt, cfg).sequences[0]
    assert stop not in engine.generate([5, 6, 7], cfg).sequences[0]
    with pytest.raises(TokenizerMismatchError, match="end tokens"):
        HybridEngine(make_model(make_config("block"), seed=0), verifier)
