"""The text checks on a finished action run in order and say what they changed."""

from __future__ import annotations

import json
from typing import Any

from agentflow.engine.action_mending import MADE_UP, REDUNDANT, REPEATED, RESTORED, mend_action
from agentflow.engine.chat_template import ChatMessage, ToolSpec

TRACK = ToolSpec(
    "track",
    "Track a parcel",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "email": {"type": "string"},
            "carrier": {"type": "string"},
        },
        "required": ["id"],
    },
)
ASKED = [ChatMessage("user", "track #86669 for kim@x.io. also track ET3453")]


def action(*calls: dict[str, Any]) -> str:
    body = [{"name": "track", "arguments": a} for a in calls]
    return json.dumps({"tool_calls": body}, separators=(",", ":"))


def test_each_check_changes_the_action_and_notes_it_in_order() -> None:
    miscopied = {"id": "#86696", "email": "kim@x.io"}
    written = action(miscopied, miscopied, {"id": "ET3453", "carrier": "dhlx"})
    text, notes = mend_action(written, ASKED, [TRACK])
    assert text == action({"id": "#86669", "email": "kim@x.io"}, {"id": "ET3453"})
    assert notes == [
        f"{REDUNDANT} track",
        f"{RESTORED} #86696 → #86669",
        f"{MADE_UP} track.carrier",
    ]


def test_checks_that_are_off_change_nothing() -> None:
    written = action({"id": "#86669"}, {"id": "#86669"})
    off = {"drop_redundant_calls": False, "restore_copies": False, "drop_made_up_options": False}
    assert mend_action(written, ASKED, [TRACK], **off) == (written, [])
    assert mend_action(action({"id": "#86669"}), ASKED, [TRACK]) == (action({"id": "#86669"}), [])


def test_an_email_slot_gets_the_requests_email_with_the_near_copies() -> None:
    # "email" names the slot: it gets the request's one e-mail, and the note says so
    # beside the near copy restored in the same call.
    written = action({"id": "#86696", "email": "kim"})
    text, notes = mend_action(written, [ChatMessage("user", "track #86669 for kim@x.io")], [TRACK])
    assert text == action({"id": "#86669", "email": "kim@x.io"})
    assert notes == [f"{RESTORED} #86696 → #86669, kim → kim@x.io"]


def test_repeated_list_items_go_with_the_redundant_calls() -> None:
    reboot = ToolSpec(
        "reboot",
        "Power-cycle servers",
        {
            "type": "object",
            "properties": {"targets": {"type": "array", "items": {"type": "string"}}},
        },
    )
    asked = [ChatMessage("user", "reboot app-dev-04.lan, api-us08")]

    def calls(*targets: str) -> str:
        body = [{"name": "reboot", "arguments": {"targets": list(targets)}}]
        return json.dumps({"tool_calls": body}, separators=(",", ":"))

    written = calls("app-dev-04.lan", "api-us08", "api-us08")
    text, notes = mend_action(written, asked, [reboot])
    assert text == calls("app-dev-04.lan", "api-us08")
    assert notes == [f"{REPEATED} api-us08"]
    untouched = mend_action(
        written, asked, [reboot], drop_redundant_calls=False, restore_copies=False
    )
    assert untouched == (written, [])


def test_a_call_that_a_restored_value_makes_a_repeat_goes_too() -> None:
    lookup = ToolSpec(
        "get_customer",
        "Search customers by email",
        {"type": "object", "properties": {"contact": {"type": "string"}}, "required": ["contact"]},
    )
    asked = [ChatMessage("user", "is there an account with lmartin@corp.org")]
    calls = [
        {"name": "get_customer", "arguments": {"contact": "lmartin@corp.org"}},
        # "lmartin@corp" is said inside the address, so the first look keeps it;
        # the slot named for an e-mail then gets the request's e-mail
        {"name": "get_customer", "arguments": {"contact": "lmartin@corp"}},
    ]
    written = json.dumps({"tool_calls": calls}, separators=(",", ":"))

    text, notes = mend_action(written, asked, [lookup])

    assert json.loads(text)["tool_calls"] == calls[:1]
    assert notes == [
        f"{RESTORED} lmartin@corp → lmartin@corp.org",
        f"{REDUNDANT} get_customer",
    ]
