"""A step's bonuses: tool names by words and meaning, and an answer where no tool serves."""

from __future__ import annotations

import pytest
from engine_testing import SUPPORT_TOOLS

from agentflow.engine.chat_template import ToolSpec
from agentflow.engine.tool_priors import StepBonuses, serves_no_tool, step_bonuses
from agentflow.engine.tool_relevance import tool_bonuses
from agentflow.engine.tool_similarity import WordVectors, similarity_bonuses

TOOLS = SUPPORT_TOOLS


def bonuses(request: str, vectors: WordVectors | None, **weights: float) -> StepBonuses:
    given = {"relevance_weight": 0.0, "similarity_weight": 0.0, "answer_bonus": 0.0, **weights}
    return step_bonuses(request, TOOLS, vectors=vectors, **given)


def test_a_step_adds_the_word_overlap_and_the_similarity_bonuses(vectors: WordVectors) -> None:
    request = "where is my order? tracking please"
    overlap = tool_bonuses(request, TOOLS, 7.0)
    meaning = similarity_bonuses(request, TOOLS, vectors, 20.0)
    both = bonuses(request, vectors, relevance_weight=7.0, similarity_weight=20.0)
    assert both.tools == pytest.approx({n: overlap[n] + meaning[n] for n in overlap})
    assert both.keys == {}  # it holds words of the tools: a call is plausible
    assert bonuses(request, None, relevance_weight=7.0).tools == overlap
    assert bonuses(request, vectors, similarity_weight=20.0).tools == pytest.approx(meaning)
    with pytest.raises(ValueError, match="word vectors"):
        bonuses(request, None, similarity_weight=1.0)
    with pytest.raises(ValueError, match="answer bonus"):
        bonuses(request, vectors, answer_bonus=-1.0)
    assert (
        step_bonuses(
            request,
            [],
            relevance_weight=7.0,
            similarity_weight=20.0,
            answer_bonus=8.0,
            vectors=None,
        )
        == StepBonuses()
    )


@pytest.mark.parametrize(
    ("request_text", "no_tool"),
    [
        ("thanks, bye", True),
        ("ok thank you so much", True),
        ("can you order me a pizza", False),  # "order" is in two tools' descriptions
        ("tell me a joke", True),
        ("what's the capital of France?", False),  # a name: a value a tool could take
        ("how warm is it in Oslo right now", False),
        ("my parcel hasn't arrived, where is it?", False),  # close to locate_shipment
        ("bye, and refund 12.50 please", False),  # a value: something to call with
        ('bye "hi"', False),  # quoted text is an argument too
    ],
)
def test_a_request_no_tool_serves_gets_the_answer_bonus(
    vectors: WordVectors, request_text: str, no_tool: bool
) -> None:
    assert serves_no_tool(request_text, TOOLS, vectors) is no_tool
    found = bonuses(request_text, vectors, answer_bonus=4.0)
    assert found.keys == ({"final": 4.0, "tool_calls": 0.0} if no_tool else {})
    assert bonuses(request_text, vectors).keys == {}  # a bonus of 0: off


def test_the_bonuses_go_to_the_session_only_where_there_are_some() -> None:
    class Session:
        def __init__(self) -> None:
            self.calls: list[tuple[str, object]] = []

        def prefer(
            self, bonuses: dict[str, float], *, once: bool, lasting: dict[str, float]
        ) -> None:
            self.calls.append(("prefer", (bonuses, once, lasting)))

        def prefer_keys(self, bonuses: dict[str, float]) -> None:
            self.calls.append(("prefer_keys", bonuses))

    session = Session()
    StepBonuses().apply(session)
    assert session.calls == []
    StepBonuses({"a": 1.0, "b": 0.0}, {"final": 8.0, "tool_calls": 0.0}).apply(session)
    assert session.calls == [
        ("prefer", ({"a": 1.0, "b": 0.0}, True, {})),
        ("prefer_keys", {"final": 8.0, "tool_calls": 0.0}),
    ]
    session.calls.clear()
    StepBonuses(lasting={"a": -6.0, "b": 0.0}).apply(session)
    assert session.calls == [("prefer", ({}, True, {"a": -6.0, "b": 0.0}))]
    assert not serves_no_tool("thanks, bye", [], WordVectors.load())


def test_a_tool_the_values_cannot_fill_gets_no_bonus_for_its_words() -> None:
    def tool(name: str, description: str, **numbers: bool) -> ToolSpec:
        properties: dict[str, object] = {"id": {"type": "string"}}
        properties.update({n: {"type": "number"} for n in numbers})
        schema = {"type": "object", "properties": properties, "required": list(properties)}
        return ToolSpec(name, description, schema)

    tools = [tool("refund_order", "Refund an order", sum=True), tool("find_order", "Order details")]

    def priors(request: str, fit_weight: float) -> StepBonuses:
        return step_bonuses(
            request,
            tools,
            relevance_weight=7.0,
            similarity_weight=0.0,
            answer_bonus=0.0,
            vectors=None,
            fit_weight=fit_weight,
        )

    request = "refund everything on order 606333 because it arrived damaged"
    words_only, with_fit = priors(request, 0.0), priors(request, 16.0)
    assert words_only.tools["refund_order"] > 0  # "refund" is the tool's word
    assert with_fit.lasting["refund_order"] < 0  # no amount for its required sum
    assert with_fit.tools["refund_order"] == 0.0
    assert with_fit.tools["find_order"] == words_only.tools["find_order"]
    # given an amount, the refund fits and keeps its words' bonus
    assert priors("refund 12.50 on order 606333", 16.0).tools["refund_order"] > 0
