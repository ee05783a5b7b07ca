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


def refund(**arguments: Any) -> str:
    return json.dumps(
        {"tool_calls": [{"name": "refund", "arguments": arguments}]}, separators=(",", ":")
    )


@pytest.mark.parametrize(
    ("written", "request_text", "expected"),
    [
        (  # twins, the free number has cents
            {"id": "230121", "sum": 230121},
            "can I get 56.90 EUR back for 230121?",
            {"id": "230121", "sum": 56.9},
        ),
        (  # twins, the twin has cents: the free number is the id
            {"id": "202.83", "sum": 202.83},
            "Refnud 202.83 for my purcahse 4920",
            {"id": "4920", "sum": 202.83},
        ),
        (  # swapped
            {"id": "199.46", "sum": 5218},
            "rfeund 199.46 for my pucrhase 5218",
            {"id": "5218", "sum": 199.46},
        ),
    ],
)
def test_an_amount_with_cents_goes_to_the_numeric_slot(
    written: dict[str, Any], request_text: str, expected: dict[str, Any]
) -> None:
    mended, _ = restore_twins(refund(**written), asked(request_text))

    assert json.loads(mended)["tool_calls"][0]["arguments"] == expected


def test_without_cents_nothing_is_guessed() -> None:
    twins = refund(id="418811", sum=418811)
    assert restore_twins(twins, asked("refund 473 dollars for my purchase 418811")) is None
    right = refund(id="88165", sum=198.1)
    assert restore_twins(right, asked("Can I get €198.10 back for 88165?")) is None
