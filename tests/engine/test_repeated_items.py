"""A list argument keeps a value as often as the conversation gives it."""

from __future__ import annotations

import json
from typing import Any

from agentflow.engine.chat_template import ChatMessage
from agentflow.engine.repeated_items import without_repeated_items

ASKED = [ChatMessage("user", "reboot app-dev-04.lan, api-us08 please")]
SCHEMA = {
    "type": "object",
    "properties": {
        "tool_calls": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "arguments": {
                        "type": "object",
                        "properties": {
                            "targets": {"type": "array", "items": {"type": "string"}, "minItems": 3}
                        },
                    },
                },
            },
        }
    },
}


def action(**arguments: Any) -> str:
    body = [{"name": "reboot", "arguments": arguments}]
    return json.dumps({"tool_calls": body}, separators=(",", ":"))


def test_a_value_listed_more_often_than_it_was_said_is_dropped() -> None:
    written = action(targets=["app-dev-04.lan", "api-us08", "api-us08"], force=True)
    assert without_repeated_items(written, ASKED) == (
        action(targets=["app-dev-04.lan", "api-us08"], force=True),
        ["api-us08"],
    )
    # Inside objects of a list too, and whatever the case.
    nested = json.dumps(
        {
            "tool_calls": [
                {"name": "reboot", "arguments": {"hosts": [{"names": ["API-us08", "API-us08"]}]}}
            ]
        },
        separators=(",", ":"),
    )
    found = without_repeated_items(nested, ASKED)
    assert found is not None and json.loads(found[0])["tool_calls"][0]["arguments"] == {
        "hosts": [{"names": ["API-us08"]}]
    }


def test_values_said_as_often_as_listed_and_other_items_stay() -> None:
    twice = [ChatMessage("user", "ping web-1, then web-1 again; 3 times 3")]
    assert without_repeated_items(action(targets=["web-1", "web-1"]), twice) is None
    # Numbers and the model's own values once each are not repeats.
    assert without_repeated_items(action(counts=[3, 3], tags=["x", "y"]), ASKED) is None
    # Only after the request: a step after a tool result takes its values from it.
    after = [*ASKED, ChatMessage("tool", "ok")]
    assert without_repeated_items(action(targets=["api-us08", "api-us08"]), after) is None


def test_an_action_the_drop_would_break_is_left_as_it_is() -> None:
    written = action(targets=["app-dev-04.lan", "api-us08", "api-us08"])
    assert without_repeated_items(written, ASKED, schema=SCHEMA) is None
