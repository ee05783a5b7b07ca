"""EmbeddedModel / HybridModel on tiny random-weight checkpoints written by the fixtures.

Random weights know nothing, so these tests check what the constraint guarantees:
every step's action is valid for the action schema; plus batching, streaming,
usage, the constraint cache and the hybrid/AR paths.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import anyio
import jsonschema
import pytest
import torch
from pydantic import BaseModel
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from agentflow import Agent, MaxStepsExceeded, tool
from agentflow.engine.argument_fit import fit_bonuses
from agentflow.engine.chat_template import (
    SPECIAL_TOKENS,
    ChatMessage,
    copy_sources,
    format_final,
    format_tool_calls,
    render_choice_prior,
    render_prompt,
)
from agentflow.engine.checkpoints import save_checkpoint
from agentflow.engine.constraints import action_schema
from agentflow.engine.constraints.automaton_store import CACHE_ENV
from agentflow.engine.constraints.copy_choices import request_spans
from agentflow.engine.errors import CheckpointError
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.model import AttentionMode, ModelConfig, Transformer
from agentflow.engine.tokenizer import Tokenizer
from agentflow.engine.tool_priors import step_bonuses
from agentflow.engine.tool_ranker import ToolRanker
from agentflow.engine.tool_similarity import WordVectors
from agentflow.engine.training.evaluate import eval_cases
from agentflow.models import EmbeddedModel, HybridModel, StepRequest
from agentflow.models._step_decoding import SECOND_CHOICE
from agentflow.models.embedded import (
    ANSWER_BONUS,
    ARGUMENT_FIT,
    TOOL_RANKER,
    TOOL_RELEVANCE,
    TOOL_SIMILARITY,
)


@tool
def get_order(order_id: str, expand: bool = False) -> dict[str, Any]:
    """Look up an order.

    Args:
        order_id: The order number.
        expand: Include line items.
    """
    return {"order_id": order_id, "status": "shipped"}


def _corpus() -> list[str]:
    tools = [get_order.spec]
    convo = [
        ChatMessage(role="user", content="Where is order 58213? Refund 20 euros please."),
        ChatMessage(
            role="assistant", content=format_tool_calls([("get_order", {"order_id": "58213"})])
        ),
        ChatMessage(role="tool", name="get_order", content='{"status":"shipped"}'),
        ChatMessage(role="assistant", content=format_final("It has shipped.")),
    ]
    return [render_prompt(convo, tools, instructions="Help customers.")] * 20


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(_corpus(), trainer=trainer)
    return Tokenizer(hf)


def _checkpoint(folder: Path, tokenizer: Tokenizer, attention: AttentionMode, seed: int) -> Path:
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size,
        dim=32,
        n_layers=1,
        n_heads=2,
        n_kv_heads=1,
        ffn_dim=64,
        max_seq_len=1024,
        attention=attention,
        block_length=8,
        mask_token_id=tokenizer.mask_id,
        end_token_id=tokenizer.end_id,
        pad_token_id=tokenizer.pad_id,
    )
    model = Transformer(config)
    model.init_weights(seed)
    return save_checkpoint(model, tokenizer, folder, dtype=torch.float32)


@pytest.fixture(scope="module")
def dlm_path(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> Path:
    return _checkpoint(tmp_path_factory.mktemp("dlm"), tokenizer, "block", 0)


@pytest.fixture(scope="module")
def ar_path(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> Path:
    return _checkpoint(tmp_path_factory.mktemp("ar"), tokenizer, "causal", 1)


GEN = GenerationConfig(max_new_tokens=20, block_length=8, steps=8)


@pytest.fixture(scope="module")
def embedded(dlm_path: Path) -> EmbeddedModel:
    """One model for the module: loading and constraint compilation happen once."""
    return EmbeddedModel(dlm_path, generation=GEN)


def support_agent(model: EmbeddedModel) -> Agent[None, str]:
    # One call per step keeps the automaton (and the test) small.
    return Agent("support", "Help customers.", [get_order], model=model, parallel_tool_calls=False)


def request(agent: Agent[Any, Any], text: str = "Where is order 58213?") -> StepRequest:
    return agent.build_request([ChatMessage(role="user", content=text)])


def assert_valid(text: str, schema: dict[str, Any]) -> None:
    jsonschema.validate(json.loads(text), schema)


def spy_on_generate(model: EmbeddedModel, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Load ``model`` and record each call of its diffusion engine's ``generate``
    (``config`` and the keyword arguments: ``constraints``, ``choice_priors``, ...)."""
    model.load()
    engine = model._engine("diffusion")
    seen: list[dict[str, Any]] = []
    original = engine.generate

    def spy(prompts: Any, config: GenerationConfig, **kwargs: Any) -> Any:
        seen.append({"config": config, **kwargs})
        return original(prompts, config, **kwargs)

    monkeypatch.setattr(engine, "generate", spy)
    return seen


@pytest.mark.slow
@pytest.mark.anyio
async def test_step_and_stream_return_schema_valid_actions_with_usage(
    embedded: EmbeddedModel, dlm_path: Path
) -> None:
    req = request(support_agent(embedded))
    response = await embedded.step(req)
    assert_valid(response.text, req.action_schema)
    assert json.loads(response.action.to_json()) == json.loads(response.text)
    u = response.usage
    assert u.mode == "diffusion" and u.model == dlm_path.name
    assert u.input_tokens > 20 and u.output_tokens > 0 and u.forward_passes > 0
    assert u.forced_tokens > 0  # e.g. '{"' and key names are forced by the schema
    compiled = dict(embedded._constraints)

    items = [item async for item in embedded.stream_step(req)]
    *deltas, streamed = items
    assert_valid(streamed.text, req.action_schema)
    assert deltas and all(streamed.text.startswith(d.text) for d in deltas)
    assert deltas[-1].text == streamed.text
    assert embedded._constraints == compiled  # compiled once per schema


@pytest.mark.slow
@pytest.mark.anyio
async def test_concurrent_runs_are_batched_and_every_step_is_valid(embedded: EmbeddedModel) -> None:
    embedded.batcher.window_s = 0.2
    agent = support_agent(embedded)
    agent.max_steps = 1
    outcomes: list[Any] = []

    async def one(text: str) -> None:
        try:
            outcomes.append(await agent.run(text))
        except MaxStepsExceeded as exc:  # random weights may call a tool first
            outcomes.append(exc.partial)

    async with anyio.create_task_group() as tg:
        for text in ("order 1?", "where is 3"):
            tg.start_soon(one, text)
    assert max(embedded.batcher.batch_sizes) == 2
    for result in outcomes:
        (step,) = result.steps
        assert step.retry_reason is None  # constrained actions are never rejected
        assert_valid(step.text, agent.action_schema)
        assert step.usage.batch_size == 2


@pytest.mark.slow
@pytest.mark.anyio
async def test_hybrid_and_ar_modes_are_valid_and_reported(dlm_path: Path, ar_path: Path) -> None:
    model = HybridModel(dlm_path, ar_path, generation=GEN)
    req = request(support_agent(model))
    hybrid = await model.step(req)
    assert_valid(hybrid.text, req.action_schema)
    assert hybrid.usage.mode == "hybrid" and hybrid.usage.reason == "requested"
    ar = EmbeddedModel(dlm_path, verifier=ar_path, mode="ar", generation=GEN)
    response = await ar.step(req)
    assert_valid(response.text, req.action_schema)
    assert response.usage.mode == "ar"


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_repeated_prompt_is_copied_from_the_prompt_cache_in_every_mode(
    dlm_path: Path, ar_path: Path
) -> None:
    """The second step over the same conversation copies its prompt instead of reading
    it (all of it where tokens the schema forces follow it, else all but its last);
    ``prompt_cache=0`` turns that off in every mode."""
    for mode in ("diffusion", "ar", "hybrid"):
        for keep in (None, 0):
            model = EmbeddedModel(
                dlm_path, verifier=ar_path, mode=mode, generation=GEN, prompt_cache=keep
            )
            req = request(support_agent(model))
            first, second = await model.step(req), await model.step(req)
            assert first.usage.cached_input_tokens == 0
            cached = second.usage.cached_input_tokens
            if keep is None:
                assert 0 < cached <= second.usage.input_tokens, mode
            else:
                assert cached == 0, mode
            assert second.text == first.text  # greedy, same prompt: same action
    with pytest.raises(ValueError, match="prompt_cache"):
        EmbeddedModel(dlm_path, prompt_cache=-1)


def test_bad_modes_are_rejected(dlm_path: Path) -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        EmbeddedModel(dlm_path, mode="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="HybridModel mode"):
        HybridModel(mode="diffusion")  # type: ignore[arg-type]
    model = EmbeddedModel(dlm_path, mode="hybrid", generation=GEN)
    agent = Agent("a", model=model)
    with pytest.raises(ValueError, match="needs an autoregressive verifier"):
        anyio.run(model.step, request(agent))


def test_a_typed_output_is_shown_to_the_model(embedded: EmbeddedModel) -> None:
    class Report(BaseModel):
        status: Literal["ok", "warning"]
        summary: str

    typed = Agent("report", "Report.", [get_order], model=embedded, output_type=Report)
    job = embedded._job(request(typed), None)
    assert 'final: {status: "ok"|"warning", summary: string}' in job.prompt
    assert job.prior is not None and "final: {" in job.prior
    assert "final: {" not in embedded._job(request(support_agent(embedded)), None).prompt


def test_the_default_mode_is_auto_when_a_verifier_comes_with_the_model(
    dlm_path: Path, ar_path: Path
) -> None:
    # Nothing loads at construction: this only checks the rule.
    assert EmbeddedModel().mode == "auto"  # the packaged drafter brings its verifier
    assert EmbeddedModel(dlm_path, verifier=ar_path).mode == "auto"
    assert EmbeddedModel(dlm_path).mode == "diffusion"  # a drafter alone
    assert EmbeddedModel(mode="diffusion").mode == "diffusion"  # an explicit mode wins


@pytest.mark.anyio
async def test_the_packaged_drafter_brings_the_packaged_verifier() -> None:
    model = EmbeddedModel(mode="hybrid", generation=GenerationConfig(max_new_tokens=16))
    req = request(support_agent(model))
    response = await model.step(req)
    assert_valid(response.text, req.action_schema)
    assert response.usage.mode == "hybrid"


@pytest.mark.anyio
async def test_steps_pass_the_conversation_without_its_request_as_the_choice_prior(
    dlm_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = EmbeddedModel(dlm_path)  # the default decoding knobs score choices
    agent = support_agent(model)
    req = request(agent)
    seen = spy_on_generate(model, monkeypatch)
    response = await model.step(req)
    assert_valid(response.text, req.action_schema)
    (call,) = seen
    assert call["config"].score_choices is True
    assert call["config"].text_threshold == 0.99  # copied values commit only where sure
    assert call["config"].second_choice == 3.0  # a close tool choice is decoded again
    (session,) = call["constraints"]
    assert session.canonical  # the tokenizer's own segmentation
    # String values may copy spans of the request whole.
    assert session.copy_spans and session.copy_spans == request_spans(copy_sources(req.messages))
    prior = render_prompt([], req.tools, instructions=req.instructions)  # no user message left
    assert call["choice_priors"] == [prior]
    assert render_choice_prior([ChatMessage(role="assistant", content="hi")]) is None
    assert session.preferred == {}  # one tool: no tool choice to weigh


@tool
def cancel_order(order_id: str) -> str:
    """Cancel an order before it ships."""
    return "cancelled"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("relevance", "similarity", "ranker"),
    [
        (TOOL_RELEVANCE, TOOL_SIMILARITY, TOOL_RANKER),
        (3.0, 0.0, 0.0),
        (0.0, 20.0, 0.0),
        (0.0, 0.0, 1.5),
        (0.0, 0.0, 0.0),
    ],
)
async def test_steps_weigh_tool_names_by_the_request(
    dlm_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    vectors: WordVectors,
    relevance: float,
    similarity: float,
    ranker: float,
) -> None:
    model = EmbeddedModel(
        dlm_path, tool_relevance=relevance, tool_similarity=similarity, tool_ranker=ranker
    )
    agent = Agent("support", "Help.", [get_order, cancel_order], model=model)
    req = request(agent, "Please cancel order 58213")
    seen = spy_on_generate(model, monkeypatch)
    assert_valid((await model.step(req)).text, req.action_schema)
    ((session,),) = [call["constraints"] for call in seen]
    want = step_bonuses(
        "Please cancel order 58213",
        req.tools,
        relevance_weight=relevance,
        similarity_weight=similarity,
        answer_bonus=0.0,
        vectors=vectors,
        ranker=ToolRanker.load(vectors=vectors),
        ranker_weight=ranker,
    ).tools
    assert session.preferred == pytest.approx(want)
    assert bool(want) == (relevance > 0 or similarity > 0 or ranker > 0)
    assert session._prefer_once == bool(want)  # a first call's tool is not favoured again
    if want:  # by its words ("cancel" names one tool, "order" both), meaning or the ranker
        assert set(want) == {"get_order", "cancel_order"}
        assert want["cancel_order"] > want["get_order"]


@pytest.mark.anyio
@pytest.mark.parametrize("cache", ["on", "off"])
async def test_steps_keep_their_automata_in_the_cache_folder(
    dlm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: str
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path) if cache == "on" else "off")
    model = EmbeddedModel(dlm_path, generation=GEN)
    req = request(support_agent(model))
    assert_valid((await model.step(req)).text, req.action_schema)
    files = list((tmp_path / "automata").glob("*.safetensors"))
    assert len(files) == (1 if cache == "on" else 0)
    if cache == "on":  # a new process (model) reads it instead of indexing the schema again
        import agentflow.engine.constraints.index as index

        def no_indexing(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the schema was indexed again")

        monkeypatch.setattr(index, "build_token_automaton", no_indexing)
        again = EmbeddedModel(dlm_path, generation=GEN)
        assert_valid((await again.step(req)).text, req.action_schema)


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("tool_relevance", "high"),
        ("tool_similarity", float("inf")),
        ("tool_ranker", float("nan")),
        ("answer_bonus", -2.0),
        ("argument_fit", -1.0),
    ],
)
def test_a_tool_weight_out_of_range_is_refused(dlm_path: Path, name: str, bad: object) -> None:
    with pytest.raises(ValueError, match=name):
        EmbeddedModel(dlm_path, **{name: -1.0})
    model = EmbeddedModel(dlm_path)
    agent = Agent("support", "Help.", [get_order, cancel_order], model=model)
    req = request(agent, "Please cancel order 58213")
    with pytest.raises(ValueError, match=name):  # a step's own setting too
        anyio.run(model.step, replace(req, settings={name: bad}))


def test_a_step_may_set_its_own_tool_weights(dlm_path: Path, vectors: WordVectors) -> None:
    model = EmbeddedModel(dlm_path, tool_relevance=0.0, tool_similarity=0.0, tool_ranker=0.0)
    agent = Agent("support", "Help.", [get_order, cancel_order], model=model)
    req = request(agent, "Please cancel order 58213")
    settings = {
        "tool_relevance": 2.0,
        "tool_similarity": 5.0,
        "tool_ranker": 0.5,
        "temperature": 0.0,
    }
    job = model._job(replace(req, settings=settings), None)
    assert model._bonuses(job).tools == pytest.approx(
        step_bonuses(
            "Please cancel order 58213",
            req.tools,
            relevance_weight=2.0,
            similarity_weight=5.0,
            answer_bonus=0.0,
            vectors=vectors,
            ranker=ToolRanker.load(vectors=vectors),
            ranker_weight=0.5,
        ).tools
    )
    assert job.settings == {"temperature": 0.0}  # not a decoding knob
    assert model._bonuses(model._job(req, None)).tools == {}


@tool
def refund_order(order_id: str, amount: float) -> str:
    """Send money back to the customer."""
    return "refunded"


def test_steps_penalise_the_tools_a_request_cannot_fill(dlm_path: Path) -> None:
    model = EmbeddedModel(dlm_path, tool_relevance=0.0, tool_similarity=0.0, answer_bonus=0.0)
    agent = Agent("support", "Help.", [get_order, refund_order], model=model)
    req = request(agent, "handle my order ord_58213")
    lasting = model._bonuses(model._job(req, None)).lasting
    # No amount in the request: the refund's required number has nothing to take.
    assert lasting == fit_bonuses(req.messages[-1].content, req.tools, ARGUMENT_FIT)
    assert lasting == {"get_order": 0.0, "refund_order": -ARGUMENT_FIT}
    # A question counts one more against the tool that changes state.
    asked = request(agent, "any news on my order ord_58213?")
    assert model._bonuses(model._job(asked, None)).lasting["refund_order"] == -2 * ARGUMENT_FIT
    off = replace(req, settings={"argument_fit": 0.0})
    assert model._bonuses(model._job(off, None)).lasting == {}
    # After a tool result the values come from it: the request is not read.
    call = '{"tool_calls":[{"name":"get_order","arguments":{"order_id":"ord_58213"}}]}'
    later = replace(
        req,
        messages=[
            *req.messages,
            ChatMessage(role="assistant", content=call),
            ChatMessage(role="tool", content='{"status":"shipped"}', name="get_order"),
        ],
    )
    assert model._bonuses(model._job(later, None)).lasting == {}


def test_tool_similarity_without_its_word_vectors_fails_the_step_by_name(
    dlm_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    model = EmbeddedModel(dlm_path, generation=GEN)
    agent = Agent("support", "Help.", [get_order, cancel_order], model=model)
    req = request(agent, "Please cancel order 58213")
    with pytest.raises(CheckpointError, match="pip install wordllama"):
        anyio.run(model.step, req)
    # Turned off (the ranker and the answer bonus read the vectors too), the step runs.
    settings = {"tool_similarity": 0.0, "tool_ranker": 0.0, "answer_bonus": 0.0}
    off = replace(req, settings=settings)
    assert_valid(anyio.run(model.step, off).text, req.action_schema)


@pytest.mark.anyio
@pytest.mark.parametrize("bonus", [ANSWER_BONUS, 0.0])
async def test_a_request_no_tool_serves_favours_an_answer(
    dlm_path: Path, monkeypatch: pytest.MonkeyPatch, bonus: float
) -> None:
    model = EmbeddedModel(dlm_path, answer_bonus=bonus)
    agent = Agent("support", "Help.", [get_order, cancel_order], model=model)
    seen = spy_on_generate(model, monkeypatch)
    for text, no_tool in (("thanks, bye", True), ("Please cancel order 58213", False)):
        req = request(agent, text)
        assert_valid((await model.step(req)).text, req.action_schema)
        want = {"final": bonus, "tool_calls": 0.0} if no_tool and bonus else {}
        (session,) = seen.pop()["constraints"]
        assert session._key_bonuses == want
    job = model._job(replace(request(agent, "bye"), settings={"answer_bonus": 2.0}), None)
    assert job.answer == 2.0 and "answer_bonus" not in job.settings


TWO_ASKS = "Where is order 58213? and cancel order 60417"


def scripted_decodes(
    model: EmbeddedModel, monkeypatch: pytest.MonkeyPatch, *texts: str | list[str]
) -> list:
    """Make the diffusion engine answer ``texts[i]`` (a text, or one per row) to its
    ``i``-th call (it decodes as it would past them); the calls' ``prompts`` and
    keyword arguments, recorded."""
    model.load()
    engine = model._engine("diffusion")
    calls: list[dict[str, Any]] = []
    original = engine.generate

    def scripted(prompts: Any, config: GenerationConfig, **kwargs: Any) -> Any:
        calls.append({"prompts": prompts, "config": config, **kwargs})
        result = original(prompts, config, **kwargs)
        if len(calls) <= len(texts):
            answer = texts[len(calls) - 1]
            result.texts = [answer] if isinstance(answer, str) else list(answer)
        return result

    monkeypatch.setattr(engine, "generate", scripted)
    return calls


@pytest.mark.anyio
@pytest.mark.parametrize("parallel", [True, False])
async def test_an_action_that_leaves_part_of_the_request_untouched_gets_a_follow_up(
    dlm_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: bool
) -> None:
    model = EmbeddedModel(dlm_path, mode="diffusion", split_requests=False)
    agent = Agent(
        "support", "Help.", [get_order, cancel_order], model=model, parallel_tool_calls=parallel
    )
    req = request(agent, TWO_ASKS)
    first = format_tool_calls([("get_order", {"order_id": "58213"})])
    second = format_tool_calls([("cancel_order", {"order_id": "60417"})])
    calls = scripted_decodes(model, monkeypatch, first, second, first)
    response = await model.step(req)
    assert_valid(response.text, req.action_schema)
    if not parallel:  # one call per step: the schema refuses a second, nothing is decoded
        assert len(calls) == 1 and response.text == first
        return
    # The second decode asks for the untouched part as a request of its own, with its
    # tool bonuses and values to copy.
    assert len(calls) == 2
    part = "and cancel order 60417"
    (prompt,) = calls[1]["prompts"]
    messages = [*req.messages[:-1], ChatMessage("user", part)]
    assert prompt == render_prompt(messages, req.tools, instructions=req.instructions)
    (session,) = calls[1]["constraints"]
    assert session.copy_spans == request_spans([part])
    assert session.preferred["cancel_order"] > session.preferred["get_order"]
    # Its call uses the value left: the action holds both calls.
    both = [("get_order", {"order_id": "58213"}), ("cancel_order", {"order_id": "60417"})]
    assert response.text == format_tool_calls(both)
    assert response.usage.reason.endswith(f"a follow-up call for: {part}")
    off = await model.step(replace(req, settings={"follow_up_calls": False}))
    assert len(calls) == 3 and off.text == first


@pytest.mark.anyio
async def test_each_request_of_a_message_is_decoded_on_its_own(
    dlm_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = EmbeddedModel(dlm_path, mode="diffusion")
    agent = Agent("support", "Help.", [get_order, cancel_order], model=model)
    req = request(agent, TWO_ASKS)
    first = format_tool_calls([("get_order", {"order_id": "58213"})])
    second = format_tool_calls([("cancel_order", {"order_id": "60417"})])
    calls = scripted_decodes(model, monkeypatch, [first, second])
    response = await model.step(req)
    (call,) = calls  # both requests in one engine call, no follow-up needed
    parts = ["Where is order 58213?", "and cancel order 60417"]
    assert call["prompts"] == [
        render_prompt(
            [*req.messages[:-1], ChatMessage("user", p)], req.tools, instructions=req.instructions
        )
        for p in parts
    ]
    # Each part's session reads its own request: its bonuses and its values to copy.
    assert [s.copy_spans for s in call["constraints"]] == [request_spans([p]) for p in parts]
    assert (
        call["constraints"][1].preferred["cancel_order"]
        > call["constraints"][1].preferred["get_order"]
    )
    both = [("get_order", {"order_id": "58213"}), ("cancel_order", {"order_id": "60417"})]
    assert response.text == format_tool_calls(both)
    assert response.usage.reason.endswith(f"decoded one request at a time: {' | '.join(parts)}")
    off = await model.step(replace(req, settings={"split_requests": False}))
    assert calls[1]["prompts"] == [
        render_prompt(req.messages, req.tools, instructions=req.instructions)
    ]
    assert_valid(off.text, req.action_schema)


@tool
def track_order(order_id: str, carrier: str = "any") -> str:
    """Track an order's parcel."""
    return "in transit"


GET_58213 = ("get_order", {"order_id": "58213"})
CANCEL_60417 = ("cancel_order", {"order_id": "60417"})


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("setting", "asked", "written", "kept", "reason"),
    [
        (  # a call that takes no new value is dropped
            "drop_redundant_calls",
            TWO_ASKS,
            [GET_58213, GET_58213, CANCEL_60417],
            [GET_58213, CANCEL_60417],
            "dropped redundant calls: get_order",
        ),
        (  # a value written almost right is put back
            "restore_near_copies",
            "Where is order 58213?",
            [("get_order", {"order_id": "58231"})],
            [GET_58213],
            "restored near copies: 58231 → 58213",
        ),
        (  # an optional argument nobody gave a value for is dropped
            "drop_made_up_options",
            "Where is parcel 58213?",
            [("track_order", {"order_id": "58213", "carrier": "dhlx"})],
            [("track_order", {"order_id": "58213"})],
            "dropped made-up options: track_order.carrier",
        ),
    ],
    ids=["redundant", "near-copy", "made-up-option"],
)
async def test_a_check_on_the_calls_mends_the_action_and_says_so(
    dlm_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    setting: str,
    asked: str,
    written: list[tuple[str, dict[str, Any]]],
    kept: list[tuple[str, dict[str, Any]]],
    reason: str,
) -> None:
    # One request per message here: the scripted engine answers one row per call.
    model = EmbeddedModel(dlm_path, mode="diffusion", split_requests=False)
    agent = Agent("support", "Help.", [get_order, cancel_order, track_order], model=model)
    req = request(agent, asked)
    scripted_decodes(model, monkeypatch, format_tool_calls(written), format_tool_calls(written))
    response = await model.step(req)
    assert response.text == format_tool_calls(kept)
    assert response.usage.reason.endswith(reason)
    off = await model.step(replace(req, settings={setting: False}))
    assert off.text == format_tool_calls(written)
    with pytest.raises(ValueError, match=f"{setting} must be true or false"):
        await model.step(replace(req, settings={setting: "yes"}))


@pytest.fixture(scope="module")
def packaged_drafter() -> EmbeddedModel:
    return EmbeddedModel(mode="diffusion")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("case", "settings"),
    [
        (148, {}),
        # "we need 30 vault pods": argument fit's count settles it alone, so it is off here
        (258, {"argument_fit": 0.0}),
    ],
)  # held-out requests the drafter hesitates over
async def test_a_close_tool_choice_is_decoded_again_and_the_surer_call_kept(
    case: int, settings: dict[str, float], packaged_drafter: EmbeddedModel
) -> None:
    sample = eval_cases(384, 777)[case]
    tools = list(sample.tools)
    step = StepRequest(
        messages=list(sample.messages),
        tools=tools,
        action_schema=action_schema(tools, None, parallel_calls=True),
        instructions=sample.instructions,
        settings=settings,
    )
    on = await packaged_drafter.step(step)
    off = await packaged_drafter.step(replace(step, settings={**settings, "second_choice": None}))
    (wanted,) = [name for name, _ in sample.calls]
    (first,) = off.action.tool_calls
    assert first.name != wanted  # the name score alone picks a wrong tool ...
    assert [c.name for c in on.action.tool_calls] == [wanted]  # ... the runner-up's call is surer
    assert f"{SECOND_CHOICE} {wanted} for {first.name} (kept)" in on.usage.reason
    assert SECOND_CHOICE not in off.usage.reason
    assert on.usage.forward_passes > off.usage.forward_passes
