"""A value written into a host slot and its neighbour: the wrong one gets the free value."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentflow.engine.chat_template import ChatMessage
from agentflow.engine.twin_values import restore_twins


def action(**arguments: Any) -> str:
    return json.dumps(
        {"tool_calls": [{"name": "show_status", "arguments": arguments}]}, separators=(",", ":")
    )


def asked(text: str) -> list[ChatMessage]:
    return [ChatMessage("user", text)]


@pytest.mark.parametrize(
    ("request_text", "twin", "expected"),
    [
        (
            "how is node-exporter doing on search05",
            "node-exporter",
            {"machine": "search05", "name": "node-exporter"},
        ),
        ("read vault logs from db-2", "vault", {"machine": "db-2", "name": "vault"}),
        # the free value is not where a host stands: it is the other slot's
        ("is web-1 running redis-7?", "web-1", {"machine": "web-1", "name": "redis-7"}),
    ],
)
def test_the_wrong_twin_gets_the_free_value(
    request_text: str, twin: str, expected: dict[str, str]
) -> None:
    mended, pairs = restore_twins(action(machine=twin, name=twin), asked(request_text))

    assert json.loads(mended)["tool_calls"][0]["arguments"] == expected
    assert pairs == [(twin, next(v for v in expected.values() if v != twin))]


@pytest.mark.parametrize(
    ("arguments", "request_text"),
    [
        ({"machine": "mysql", "name": "mysql"}, "we need 37 mysql pods"),  # a number is free
        ({"machine": "a-1", "name": "b-2"}, "how is b-2 doing on a-1 and c-3"),  # no twins
        ({"title": "x-1", "body": "x-1"}, "post x-1 on y-2"),  # no host slot
        ({"machine": "x-1", "name": "x-1"}, "x-1 on y-2 or z-3"),  # two free values
    ],
)
def test_nothing_is_guessed(arguments: dict[str, str], request_text: str) -> None:
    assert restore_twins(action(**arguments), asked(request_text)) is None
