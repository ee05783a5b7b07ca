"""An enum argument the request names another member of gets that member."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentflow.engine.action_mending import RESTORED, mend_action
from agentflow.engine.chat_template import ChatMessage, ToolSpec
from agentflow.engine.named_members import restore_named_members

ASSIGN = ToolSpec(
    "assign_permission",
    "Grant a role",
    {
        "type": "object",
        "properties": {
            "user": {"type": "string"},
            "group": {"type": "string", "enum": ["admin", "viewer", "editor", "operator"]},
        },
        "required": ["user", "group"],
    },
)


def action(**arguments: Any) -> str:
    call = {"name": "assign_permission", "arguments": arguments}
    return json.dumps({"tool_calls": [call]}, separators=(",", ":"))


def asked(text: str) -> list[ChatMessage]:
    return [ChatMessage("user", text)]


@pytest.mark.parametrize(
    "request_text",
    ["yo assign role operator to user ldubois", "ldubois needs OPERATOR rights - asap please"],
)
def test_a_member_the_request_names_replaces_one_it_does_not(request_text: str) -> None:
    found = restore_named_members(
        action(user="ldubois", group="admin"), asked(request_text), [ASSIGN]
    )
    assert found == (action(user="ldubois", group="operator"), [("admin", "operator")])


@pytest.mark.parametrize(
    "request_text",
    [
        "make ldubois an admin, not an operator",  # the written member is named too
        "ldubois needs more rights",  # no member named: the model's reading stays
        "ldubois needs viewer or editor rights",  # two named: nothing is guessed
        'new ticket "operator console down" for ldubois',  # named only inside quotes
        "ldubois needs operators-only access",  # inside a longer word
    ],
)
def test_the_written_member_stays_unless_the_request_names_exactly_one_other(
    request_text: str,
) -> None:
    text = action(user="ldubois", group="admin")
    assert restore_named_members(text, asked(request_text), [ASSIGN]) is None


def test_named_members_are_part_of_restoring_values() -> None:
    text, notes = mend_action(
        action(user="ldubois", group="admin"), asked("assign role viewer to ldubois"), [ASSIGN]
    )
    assert json.loads(text)["tool_calls"][0]["arguments"]["group"] == "viewer"
    assert notes == [f"{RESTORED} admin → viewer"]
