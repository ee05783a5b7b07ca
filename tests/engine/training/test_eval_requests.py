"""How the evaluation decodes a batch: one request at a time, whole again, follow-ups."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from agentflow.engine.chat_template import ChatMessage, ToolSpec, format_tool_calls
from agentflow.engine.constraints import action_schema
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.training.corpus import Sample
from agentflow.engine.training.eval_requests import decode_batch

ORDER = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
TOOLS = (ToolSpec("get_order", "Look up an order", ORDER), ToolSpec("cancel_order", "", ORDER))
SCHEMA = action_schema(list(TOOLS), None)
TWO = "Status of 2537? plus can you void ORD-91016?"
ONE = "where is order 58213?"


@dataclass
class Row:
    tokens: int
    nfe: int
    forced_tokens: int


def case(request: str) -> Sample:
    return Sample(TOOLS, (ChatMessage("user", request),), "", "support", "call")


def action(*calls: tuple[str, str]) -> str:
    return format_tool_calls([(name, {"id": order}) for name, order in calls])


class ScriptedDecoder:
    """Answers each prompt by the longest of its requests it holds; records the calls."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(
        self, prompts: list[str], sessions: list[Any], config: Any, priors: list[str | None]
    ) -> tuple[list[str], list[Row], float, list[str | None]]:
        requests = [max((r for r in self.answers if r in p), key=len) for p in prompts]
        self.calls.append(requests)
        assert len(sessions) == len(prompts)
        return (
            [self.answers[r] for r in requests],
            [Row(10, 4, 2) for _ in prompts],
            0.5,
            [None] * len(prompts),
        )


def sessions(row: int, part: str | None) -> tuple[int, str | None]:
    return (row, part)


def run(
    decoder: ScriptedDecoder, *requests: str, **flags: bool
) -> tuple[list[str], list[Row], float]:
    cases = [case(r) for r in requests]
    texts, rows, seconds, _ = decode_batch(
        decoder,
        cases,
        [SCHEMA] * len(cases),
        [None] * len(cases),
        sessions,
        GenerationConfig(),
        **flags,
    )
    return texts, rows, seconds


def test_each_request_of_a_message_is_decoded_on_its_own_in_one_batch() -> None:
    decoder = ScriptedDecoder(
        {
            "Status of 2537?": action(("get_order", "2537")),
            "plus can you void ORD-91016?": action(("cancel_order", "ORD-91016")),
            ONE: action(("get_order", "58213")),
        }
    )
    texts, rows, seconds = run(decoder, TWO, ONE, split_requests=True)
    assert decoder.calls == [["Status of 2537?", "plus can you void ORD-91016?", ONE]]
    assert json.loads(texts[0]) == json.loads(
        action(("get_order", "2537"), ("cancel_order", "ORD-91016"))
    )
    assert texts[1] == action(("get_order", "58213"))
    assert rows[0] == Row(20, 4, 4)  # both parts' tokens, in the same passes
    assert rows[1] == Row(10, 4, 2)
    assert seconds == 0.5


def test_a_part_answered_sends_the_message_back_whole() -> None:
    whole = action(("get_order", "2537"), ("cancel_order", "ORD-91016"))
    decoder = ScriptedDecoder(
        {
            "Status of 2537?": action(("get_order", "2537")),
            "plus can you void ORD-91016?": '{"final":"Which order?"}',
            TWO: whole,
        }
    )
    texts, rows, seconds = run(decoder, TWO, split_requests=True)
    assert decoder.calls == [["Status of 2537?", "plus can you void ORD-91016?"], [TWO]]
    assert texts == [whole]
    assert rows[0] == Row(30, 8, 6)  # the parts' passes, then the whole decode's
    assert seconds == 1.0


def test_without_the_split_a_message_is_decoded_whole_then_followed_up() -> None:
    decoder = ScriptedDecoder(
        {
            "can you void ORD-91016?": action(("cancel_order", "ORD-91016")),
            TWO: action(("get_order", "2537")),
        }
    )
    texts, rows, _ = run(decoder, TWO, follow_up_calls=True)
    assert decoder.calls == [[TWO], ["can you void ORD-91016?"]]  # the clause left
    assert json.loads(texts[0]) == json.loads(
        action(("get_order", "2537"), ("cancel_order", "ORD-91016"))
    )
    assert rows[0] == Row(20, 8, 4)
    texts, _, _ = run(ScriptedDecoder({TWO: action(("get_order", "2537"))}), TWO)
    assert texts == [action(("get_order", "2537"))]  # neither: one decode, as written


def test_a_follow_up_decode_that_fails_fails_the_evaluation() -> None:
    # The runtime keeps the first action when a follow-up fails; an evaluation
    # must not quietly score a broken decoder.
    decoder = ScriptedDecoder({TWO: action(("get_order", "2537"))})  # no answer for the part
    with pytest.raises(ValueError):
        run(decoder, TWO, follow_up_calls=True)
