"""Decoding step jobs and their follow-up calls, with a scripted engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers

from agentflow.engine.action_mending import REDUNDANT, RESTORED
from agentflow.engine.chat_template import ChatMessage, render_prompt
from agentflow.engine.generation import (
    GenerationConfig,
    GenerationResult,
    GenerationStats,
    RowStats,
    SecondChoice,
)
from agentflow.engine.tokenizer import Tokenizer
from agentflow.models._step_decoding import (
    DROPPED,
    NOT_JOINED,
    SECOND_CHOICE,
    SPLIT,
    decode_jobs,
    decode_requests,
    mend_actions,
)
from agentflow.models._step_jobs import StepJob, step_job
from agentflow.models.base import StepRequest

REQUEST = "send me invoice INV-2023-1670. downgrade cus_457 to enterprise"
PART = "downgrade cus_457 to enterprise"
FIRST = '{"tool_calls":[{"name":"bill_show","arguments":{"id":"INV-2023-1670"}}]}'
SECOND = '{"tool_calls":[{"name":"switch_tier","arguments":{"client_id":"cus_457"}}]}'
BOTH = FIRST[: -len("]}")] + "," + SECOND[len('{"tool_calls":[') :]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    """One token per byte: token counts are byte counts."""
    hf = HFTokenizer(models.BPE(vocab={chr(i): i for i in range(32, 127)}, merges=[]))
    hf.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    hf.decoder = decoders.Fuse()
    return Tokenizer(hf)


class ScriptedEngine:
    """Answers each ``generate`` call with the next texts of a script, and records the calls."""

    def __init__(self, tokenizer: Tokenizer, script: Sequence[Sequence[str]]) -> None:
        self.tokenizer = tokenizer
        self.script = list(script)
        self.calls: list[dict[str, Any]] = []

    def generate(self, prompts: list[Any], config: GenerationConfig, **kwargs: Any) -> Any:
        self.calls.append({"prompts": prompts, "config": config, **kwargs})
        texts = list(self.script.pop(0))
        sequences = [self.tokenizer.encode(t) for t in texts]
        for row, ids in enumerate(sequences):
            kwargs["on_block"](row, ids)
        rows = [RowStats(prompt_tokens=9, tokens=len(s), nfe=3, forced_tokens=1) for s in sequences]
        return GenerationResult(sequences, GenerationStats("diffusion", rows=rows), texts)


def job(
    streamed: list[str] | None = None,
    request: str = REQUEST,
    *,
    after: Sequence[ChatMessage] = (),
    schema: dict[str, Any] | None = None,
    split: bool = False,
) -> StepJob:
    step = StepRequest(
        [ChatMessage("user", "hello"), ChatMessage("user", request), *after], [], schema or {}
    )
    return step_job(
        step,
        None if streamed is None else streamed.append,
        mode="diffusion",
        tool_relevance=0.0,
        tool_similarity=0.0,
        answer_bonus=2.0,
        argument_fit=0.0,
        split_requests=split,
        follow_up_calls=True,
        drop_redundant_calls=True,
        restore_near_copies=True,
        drop_made_up_options=True,
    )


def run(
    tokenizer: Tokenizer, script: Sequence[Sequence[str]], jobs: list[StepJob]
) -> tuple[dict[int, Any], ScriptedEngine, list[StepJob]]:
    """Decode ``jobs`` through the whole flow; the outcomes, the engine and the jobs
    that asked for a new session (parts, wholes again, follow-ups)."""
    engine = ScriptedEngine(tokenizer, script)
    config = GenerationConfig(max_new_tokens=200)
    asked: list[StepJob] = []

    def new_session(j: StepJob) -> object:
        asked.append(j)
        return object()

    own = [object()] * len(jobs)
    done = decode_requests(engine, tokenizer, jobs, own, config, "diffusion", "m", new_session)
    return done, engine, asked


def test_the_part_left_is_decoded_as_a_request_of_its_own_and_merged(
    tokenizer: Tokenizer,
) -> None:
    streamed: list[str] = []
    one, other = job(streamed), job(request="hi")
    done, engine, asked = run(tokenizer, [[FIRST, '{"final":"hi"}'], [SECOND]], [one, other])
    assert done[id(one)].text == BOTH
    assert done[id(other)].text == '{"final":"hi"}'
    # The second engine call asks for the untouched part in place of the request,
    # against the same prior, with the part's values to copy and no answer bonus.
    (again,) = asked
    assert (again.request, again.sources, again.answer) == (PART, [PART], 0.0)
    assert one.answer == 2.0
    second = engine.calls[1]
    assert second["prompts"] == [
        render_prompt([ChatMessage("user", "hello"), ChatMessage("user", PART)])
    ]
    assert second["choice_priors"] == [one.prior]
    # Usage counts both decodes; the stream shows the first action, then the merged one.
    usage = done[id(one)].usage
    assert (usage.forward_passes, usage.forced_tokens, usage.input_tokens) == (6, 2, 18)
    assert usage.output_tokens == len(FIRST) + len(SECOND)
    assert usage.reason.endswith(f"follow-up call for: {PART}")
    assert streamed == [FIRST, BOTH]


def test_a_follow_up_that_uses_none_of_the_values_left_is_dropped(tokenizer: Tokenizer) -> None:
    streamed: list[str] = []
    one = job(streamed)
    again = '{"tool_calls":[{"name":"switch_tier","arguments":{"client_id":"zz-1"}}]}'
    done, _, _ = run(tokenizer, [[FIRST], [again]], [one])
    assert done[id(one)].text == FIRST
    usage = done[id(one)].usage  # the follow-up's passes are spent all the same
    assert (usage.forward_passes, usage.output_tokens) == (6, len(FIRST) + len(again))
    assert usage.reason.endswith(f"(dropped: {DROPPED})")
    assert streamed == [FIRST]


@pytest.mark.parametrize(
    ("first", "kwargs"),
    [
        (BOTH, {}),  # the action serves the whole request
        (FIRST, {"after": [ChatMessage("tool", "{}", name="bill_show")]}),  # went on since
        (FIRST, {"schema": {"properties": {"tool_calls": {"maxItems": 1}}}}),  # one call a step
    ],
    ids=["whole", "after-the-request", "one-call-a-step"],
)
def test_no_follow_up_is_decoded_where_none_is_owed_or_allowed(
    tokenizer: Tokenizer, first: str, kwargs: dict[str, Any]
) -> None:
    one = job(**kwargs)
    done, engine, asked = run(tokenizer, [[first]], [one])
    assert (asked, len(engine.calls)) == ([], 1)
    assert done[id(one)].text == first


def test_redundant_calls_are_dropped_and_named_in_the_reason(tokenizer: Tokenizer) -> None:
    streamed: list[str] = []
    one, other = job(streamed), job()
    again = '{"name":"bill_show","arguments":{"id":"INV-2023-1670"}},'
    padded = BOTH.replace('{"name":"switch_tier"', again + '{"name":"switch_tier"')
    done, _, _ = run(tokenizer, [[padded, BOTH]], [one, other])
    assert mend_actions([one, other], done) == 1
    assert done[id(one)].text == BOTH
    assert done[id(one)].usage.reason.endswith(f"{REDUNDANT} bill_show")
    assert streamed == [padded, BOTH]
    assert done[id(other)].text == BOTH and REDUNDANT not in done[id(other)].usage.reason


def test_near_copies_are_restored_and_named_in_the_reason(tokenizer: Tokenizer) -> None:
    streamed: list[str] = []
    one, other = job(streamed), job()
    written = BOTH.replace("INV-2023-1670", "INV-2032-1670")
    # the follow-up owed to the miswritten invoice uses none of its values
    done, _, _ = run(tokenizer, [[written, BOTH], ['{"final":"x"}']], [one, other])
    assert mend_actions([one, other], done) == 1
    assert done[id(one)].text == BOTH
    assert done[id(one)].usage.reason.endswith(f"{RESTORED} INV-2032-1670 → INV-2023-1670")
    assert streamed == [written, BOTH]
    assert done[id(other)].text == BOTH and RESTORED not in done[id(other)].usage.reason


def test_a_follow_up_that_fails_leaves_the_first_action(
    tokenizer: Tokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    one = job()
    # the script has no second answer: the follow-up's engine call raises
    done, engine, _ = run(tokenizer, [[FIRST]], [one])
    assert len(engine.calls) == 2
    assert done[id(one)].text == FIRST
    assert done[id(one)].usage.reason.endswith(f"{PART} (failed: pop from empty list)")
    assert "follow-up calls failed" in caplog.text


def test_a_step_decoded_again_with_the_runner_up_says_so(tokenizer: Tokenizer) -> None:
    class DecodingAgain(ScriptedEngine):
        """Its first row kept the runner-up's decode; its second did not."""

        def generate(self, prompts: list[Any], config: GenerationConfig, **kwargs: Any) -> Any:
            result = super().generate(prompts, config, **kwargs)
            for row, kept in zip(result.stats.rows, (True, False), strict=True):
                row.second_choice = SecondChoice("bill_show", "switch_tier", 1.5, -0.9, -0.2, kept)
            return result

    streamed: list[str] = []
    jobs = [job(streamed), job(request="hi")]
    engine = DecodingAgain(tokenizer, [[SECOND, FIRST]])
    config = GenerationConfig(max_new_tokens=200)
    done = decode_jobs(engine, tokenizer, jobs, [object()] * 2, config, "diffusion", "m")
    assert done[id(jobs[0])].usage.reason.endswith(
        f"; {SECOND_CHOICE} switch_tier for bill_show (kept)"
    )
    assert done[id(jobs[1])].usage.reason.endswith("(not kept)")
    assert [done[id(j)].text for j in jobs] == [SECOND, FIRST]
    assert streamed[-1] == SECOND  # the kept decode is what the stream shows last


def test_each_request_of_a_message_is_a_row_of_the_same_batch(tokenizer: Tokenizer) -> None:
    streamed: list[str] = []
    two, one = job(streamed, split=True), job(request="hi", split=True)
    done, engine, asked = run(tokenizer, [[FIRST, SECOND, '{"final":"hi"}']], [two, one])
    (call,) = engine.calls  # one engine call: both parts and the other job
    parts = ["send me invoice INV-2023-1670.", PART]
    assert call["prompts"][:2] == [
        render_prompt([ChatMessage("user", "hello"), ChatMessage("user", p)], []) for p in parts
    ]
    assert done[id(two)].text == BOTH and streamed == [BOTH]
    assert [j.request for j in asked] == parts  # no follow-up for a joined message
    usage = done[id(two)].usage
    assert usage.output_tokens == len(FIRST) + len(SECOND)  # both parts' cost
    assert usage.forward_passes == 3  # the parts are rows of the same passes
    assert usage.reason == f"requested; {SPLIT} {' | '.join(parts)}"
    assert done[id(one)].text == '{"final":"hi"}'


def test_parts_that_do_not_join_send_the_message_back_whole(tokenizer: Tokenizer) -> None:
    two = job(split=True)
    done, engine, _ = run(tokenizer, [[FIRST, '{"final":"which plan?"}'], [BOTH]], [two])
    assert len(engine.calls) == 2
    assert engine.calls[1]["prompts"] == [two.prompt]
    assert done[id(two)].text == BOTH
    usage = done[id(two)].usage
    assert usage.forward_passes == 6  # the parts' passes, then the whole decode's
    assert usage.reason.endswith(f"({NOT_JOINED})")


@pytest.mark.parametrize(
    "case", ["not asked", "one request", "after the request", "one call a step"]
)
def test_a_message_is_decoded_whole_where_it_cannot_or_need_not_split(
    tokenizer: Tokenizer, case: str
) -> None:
    one_call = {"properties": {"tool_calls": {"type": "array", "maxItems": 1}}}
    made = {
        "not asked": job(),
        "one request": job(request="send me invoice INV-2023-1670", split=True),
        "after the request": job(after=[ChatMessage("assistant", FIRST)], split=True),
        "one call a step": job(schema=one_call, split=True),
    }[case]
    made.follow_up = False
    done, engine, asked = run(tokenizer, [[FIRST]], [made])
    assert [c["prompts"] for c in engine.calls] == [[made.prompt]] and asked == []
    assert done[id(made)].text == FIRST and SPLIT not in done[id(made)].usage.reason
