"""Optional flags the request says nothing about are dropped; flags it asks for stay."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentflow.engine.action_mending import MADE_UP, mend_action
from agentflow.engine.chat_template import ChatMessage, ToolSpec
from agentflow.engine.made_up_flags import without_made_up_flags

REBOOT = ToolSpec(
    "reset_nodes",
    "Power-cycle a list of servers",
    {
        "type": "object",
        "properties": {
            "targets": {"type": "array", "items": {"type": "string"}},
            "immediate": {"type": "boolean", "description": "Skip graceful shutdown"},
        },
        "required": ["targets"],
    },
)
CANCEL = ToolSpec(
    "stop_order",
    "Stop an order before shipping",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "email_customer": {"type": "boolean", "description": "Email the customer about it"},
        },
        "required": ["id"],
    },
)
TOOLS = [REBOOT, CANCEL]


def action(*calls: tuple[str, dict[str, Any]]) -> str:
    return json.dumps(
        {"tool_calls": [{"name": n, "arguments": a} for n, a in calls]}, separators=(",", ":")
    )


def asked(text: str) -> list[ChatMessage]:
    return [ChatMessage("user", text)]


HOSTS = {"targets": ["auth-prod", "node-13", "edge-9"]}


@pytest.mark.parametrize(
    ("request_text", "name", "values", "flag"),
    [
        ("auth-prod, node-13 & edge-9 need a reboot", "reset_nodes", HOSTS, "immediate"),
        # a plural noun before a list names its items, not a flag
        ("restart hosts auth-prod, node-13 & edge-9 please", "reset_nodes", HOSTS, "immediate"),
        ("greetings, cancel YW8389 for me", "stop_order", {"id": "YW8389"}, "email_customer"),
        (
            "can you void CH4634?. it's kind of urgent",
            "stop_order",
            {"id": "CH4634"},
            "email_customer",
        ),
    ],
)
def test_a_flag_nobody_mentioned_is_dropped(
    request_text: str, name: str, values: dict[str, Any], flag: str
) -> None:
    text = action((name, {**values, flag: True}))

    mended, names = without_made_up_flags(text, asked(request_text), TOOLS)

    assert json.loads(mended)["tool_calls"] == [{"name": name, "arguments": values}]
    assert names == [f"{name}.{flag}"]


@pytest.mark.parametrize(
    "request_text",
    [
        "cancel 9505 for me and send a confirmation",
        "cancel 9505 for me silently",
        "please cancel 9505, no need to email them",
        "force cancel 9505",
    ],
)
def test_a_flag_the_request_speaks_to_is_kept(request_text: str) -> None:
    text = action(("stop_order", {"id": "9505", "email_customer": True}))

    assert without_made_up_flags(text, asked(request_text), TOOLS) is None


def test_only_the_clauses_a_call_serves_are_read() -> None:
    text = action(
        ("reset_nodes", {"targets": ["web-1", "web-2"], "immediate": True}),
        ("stop_order", {"id": "614836", "email_customer": True}),
    )
    request = "web-1 & web-2 need a reboot. cancel 614836 for me and send a confirmation"

    mended, names = without_made_up_flags(text, asked(request), TOOLS)

    calls = json.loads(mended)["tool_calls"]
    assert calls[0]["arguments"] == {"targets": ["web-1", "web-2"]}
    assert calls[1]["arguments"] == {"id": "614836", "email_customer": True}
    assert names == ["reset_nodes.immediate"]


def test_a_required_flag_or_a_call_no_clause_holds_is_left_alone() -> None:
    required = ToolSpec(
        "toggle",
        "Turn a feature on or off",
        {
            "type": "object",
            "properties": {"feature": {"type": "string"}, "on": {"type": "boolean"}},
            "required": ["feature", "on"],
        },
    )
    text = action(("toggle", {"feature": "beta-ui", "on": True}))
    assert without_made_up_flags(text, asked("turn beta-ui please"), [required]) is None

    unheld = action(("stop_order", {"id": "777", "email_customer": True}))
    assert without_made_up_flags(unheld, asked("cancel my last order"), TOOLS) is None


def test_nothing_is_dropped_after_a_tool_result() -> None:
    text = action(("stop_order", {"id": "9505", "email_customer": True}))
    messages = [*asked("cancel 9505"), ChatMessage("tool", '{"ok": true}')]

    assert without_made_up_flags(text, messages, TOOLS) is None


def test_mend_action_names_the_dropped_flag() -> None:
    text = action(("reset_nodes", {"targets": ["api27", "lb-qa"], "immediate": True}))

    mended, notes = mend_action(text, asked("api27, lb-qa need a reboot"), TOOLS)

    assert json.loads(mended)["tool_calls"][0]["arguments"] == {"targets": ["api27", "lb-qa"]}
    assert notes == [f"{MADE_UP} reset_nodes.immediate"]


def test_a_list_flag_said_after_the_hosts_is_kept() -> None:
    text = action(("reset_nodes", {"targets": ["web-1", "web-2"], "immediate": True}))
    request = asked("restart hosts web-1 & web-2 please forcefully")

    assert without_made_up_flags(text, request, TOOLS) is None
