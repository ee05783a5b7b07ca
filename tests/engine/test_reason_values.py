"""The reason a request gives goes to the parameter named for one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentflow.engine.action_mending import RESTORED, mend_action
from agentflow.engine.chat_template import ChatMessage, ToolSpec
from agentflow.engine.reason_values import reason_parameter, request_reasons, restore_reasons


def refund_tool(why: dict[str, Any], *, name: str = "refund_order") -> ToolSpec:
    return ToolSpec(
        name,
        "Send money back to the customer",
        {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "sum": {"type": "number"},
                "why": why,
                "notes": {"type": "string"},
            },
            "required": ["id", "sum"],
        },
    )


FREE = refund_tool(
    {"anyOf": [{"type": "string", "description": "Why the customer is refunded"}, {"type": "null"}]}
)
LISTED = refund_tool(
    {"type": "string", "enum": ["damaged", "late", "wrong item", "other"], "description": "Reason"}
)


def action(*arguments: dict[str, Any], name: str = "refund_order") -> str:
    return json.dumps(
        {"tool_calls": [{"name": name, "arguments": a} for a in arguments]}, separators=(",", ":")
    )


def asked(text: str) -> list[ChatMessage]:
    return [ChatMessage("user", text)]


@pytest.mark.parametrize(
    ("request_text", "reasons"),
    [
        ("Refund everything on order SO-17108 because it arrived damaged", ["arrived damaged"]),
        (
            "can I get 249 EUR back for ORD-47922? since it was ordered by mistake - asap",
            ["ordered by mistake"],
        ),
        ("refund 5 on 12, reason: charged twice. thanks a lot", ["charged twice"]),
        (
            "Refund 331 for SO-33165 since it was never arrived and then refund 384 for A30409 because it's broken",
            ["never arrived", "broken"],
        ),
        ("Refund order 88 please", []),
        # a complaint about an order, then the money asked back
        ("order SO-14246 broken on arrival, i want my money back, asap", ["broken on arrival"]),
        ("quick one: order 97441 changed my mind, I want my money back", ["changed my mind"]),
        ("order 5 arrived, I want a refund since it was broken", ["broken"]),
        ("order 5 arrived, I want to know where it is", []),
    ],
)
def test_the_reasons_a_request_gives(request_text: str, reasons: list[str]) -> None:
    assert request_reasons(request_text) == reasons


@pytest.mark.parametrize(
    "written",
    [{}, {"why": "damaged"}, {"why": "was arrived and"}, {"notes": "arrived damaged"}],
)
def test_a_reason_missing_cut_or_misplaced_is_restored(written: dict[str, Any]) -> None:
    text = action({"id": "SO-17108", "sum": 307.45, **written})
    request = asked("Refund everything on order SO-17108 because it arrived damaged")

    mended, pairs = restore_reasons(text, request, [FREE])

    arguments = json.loads(mended)["tool_calls"][0]["arguments"]
    assert arguments == {"id": "SO-17108", "sum": 307.45, "why": "arrived damaged"}
    assert pairs == [(written.get("why", "(no why)"), "arrived damaged")]


def test_an_enum_reason_gets_the_one_member_the_reason_names() -> None:
    text = action({"id": "230121", "sum": 56.9})

    mended, _ = restore_reasons(
        text, asked("can I get 56.90 back for 230121? since it came late"), [LISTED]
    )
    assert json.loads(mended)["tool_calls"][0]["arguments"]["why"] == "late"

    unnamed = asked("can I get 56.90 back for 230121? since I changed my mind")
    assert restore_reasons(text, unnamed, [LISTED]) is None


def test_reasons_go_to_their_calls_in_order_and_only_when_they_match_up() -> None:
    two = action({"id": "SO-33165", "sum": 331}, {"id": "A30409", "sum": 384, "why": "was charged"})
    request = "Refund 331 for SO-33165 since it was never arrived and then 384 for A30409 because it charged twice"

    mended, _ = restore_reasons(two, asked(request), [FREE])

    assert [c["arguments"]["why"] for c in json.loads(mended)["tool_calls"]] == [
        "never arrived",
        "charged twice",
    ]
    one_reason = "Refund 331 for SO-33165 and then 384 for A30409 because it charged twice"
    assert restore_reasons(two, asked(one_reason), [FREE]) is None


def test_the_request_is_read_after_a_tool_result_too() -> None:
    messages = [
        *asked("Refund everything on order SO-17108 because it arrived damaged"),
        ChatMessage("tool", '{"order_id": "SO-17108", "total": 307.45}'),
    ]

    mended, notes = mend_action(action({"id": "SO-17108", "sum": 307.45}), messages, [FREE])

    assert json.loads(mended)["tool_calls"][0]["arguments"]["why"] == "arrived damaged"
    assert notes == [f"{RESTORED} (no why) → arrived damaged"]


def test_a_tool_without_a_reason_parameter_is_left_alone() -> None:
    plain = ToolSpec(
        "cancel_order",
        "Stop an order",
        {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    )
    assert reason_parameter(plain) is None
    text = action({"id": "77"}, name="cancel_order")

    assert restore_reasons(text, asked("cancel 77 because I moved"), [plain]) is None
