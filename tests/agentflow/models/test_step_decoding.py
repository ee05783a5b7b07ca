"""Decoding step jobs and their follow-up calls, with a scripted engine."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers

from agentflow.engine.call_coverage import FollowUp
from agentflow.engine.generation import (
    GenerationConfig,
    GenerationResult,
    GenerationStats,
    RowStats,
)
from agentflow.engine.tokenizer import Tokenizer
from agentflow.models._step_decoding import decode_follow_ups, decode_jobs
from agentflow.models._step_jobs import StepJob

REQUEST = "send me invoice INV-2023-1670. downgrade cus_457 to enterprise"
FIRST = '{"tool_calls":[{"name":"bill_show","arguments":{"id":"INV-2023-1670"}}]}'
SECOND = 'switch_tier","arguments":{"client_id":"cus_457"}}]}'


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


class RecordingSession:
    def __init__(self) -> None:
        self.advanced: list[int] = []

    def advance(self, token_ids: Sequence[int]) -> None:
        self.advanced.extend(token_ids)


def job(streamed: list[str] | None = None, request: str = REQUEST) -> StepJob:
    return StepJob(
        prompt="P:",
        schema={},
        mode="diffusion",
        reason="requested",
        settings={},
        on_text=None if streamed is None else streamed.append,
        prior="Q:",
        sources=[request],
        request=request,
        follow_up=True,
    )


def run(
    tokenizer: Tokenizer, script: Sequence[Sequence[str]], jobs: list[StepJob]
) -> tuple[dict[int, Any], ScriptedEngine, list[FollowUp], int]:
    engine = ScriptedEngine(tokenizer, script)
    config = GenerationConfig(max_new_tokens=200)
    done = decode_jobs(engine, tokenizer, jobs, [object()] * len(jobs), config, "diffusion", "m")
    asked: list[FollowUp] = []

    def new_session(j: StepJob, follow: FollowUp) -> RecordingSession:
        asked.append(follow)
        return RecordingSession()

    kept = decode_follow_ups(engine, tokenizer, jobs, done, config, "diffusion", "m", new_session)
    return done, engine, asked, kept


def test_a_follow_up_call_that_uses_the_values_left_is_kept(tokenizer: Tokenizer) -> None:
    streamed: list[str] = []
    one, other = job(streamed), job(request="hi")
    done, engine, asked, kept = run(tokenizer, [[FIRST, '{"final":"hi"}'], [SECOND]], [one, other])
    assert kept == 1
    action = json.loads(done[id(one)].text)
    assert [c["name"] for c in action["tool_calls"]] == ["bill_show", "switch_tier"]
    assert done[id(other)].text == '{"final":"hi"}'
    # The second engine call goes on from the action's prefix, in prompt and prior alike.
    (follow,) = asked
    assert follow.untouched == "downgrade cus_457 to enterprise"
    prefix = tokenizer.encode(follow.prefix)
    second = engine.calls[1]
    assert second["prompts"] == [tokenizer.encode("P:") + prefix]
    assert second["choice_priors"] == [tokenizer.encode("Q:") + prefix]
    assert second["config"].max_new_tokens == 200 - len(prefix)
    # Usage counts both decodes; the stream goes on from the prefix.
    usage = done[id(one)].usage
    assert (usage.forward_passes, usage.forced_tokens) == (6, 2)
    assert usage.output_tokens == len(tokenizer.encode(done[id(one)].text))
    assert "follow-up call for: downgrade cus_457" in usage.reason
    assert streamed[-1] == done[id(one)].text


def test_a_follow_up_call_that_does_not_use_them_is_dropped(tokenizer: Tokenizer) -> None:
    streamed: list[str] = []
    one = job(streamed)
    again = 'bill_show","arguments":{"id":"INV-2023-1670"}}]}'
    done, _, _, kept = run(tokenizer, [[FIRST], [again]], [one])
    assert kept == 0
    assert done[id(one)].text == FIRST
    usage = done[id(one)].usage  # the follow-up's passes are spent all the same
    assert (usage.forward_passes, usage.output_tokens) == (6, len(FIRST))
    assert usage.reason.endswith("(dropped: it used none of its values)")
    assert streamed[-1] == FIRST  # the streamed draft goes back to the action kept


def test_an_action_that_serves_the_whole_request_is_not_decoded_again(
    tokenizer: Tokenizer,
) -> None:
    both = FIRST[:-2] + ',{"name":"' + SECOND
    whole = job()
    done, engine, asked, kept = run(tokenizer, [[both]], [whole])
    assert (kept, asked, len(engine.calls)) == (0, [], 1)
    assert done[id(whole)].text == both
