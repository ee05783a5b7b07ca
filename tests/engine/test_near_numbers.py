"""A number written almost right becomes the conversation's number it miscopies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentflow.engine.chat_template import ChatMessage
from agentflow.engine.near_numbers import restore_near_numbers


def action(**arguments: Any) -> str:
    return json.dumps(
        {"tool_calls": [{"name": "t", "arguments": arguments}]}, separators=(",", ":")
    )


def arguments_of(text: str) -> dict[str, Any]:
    return json.loads(text)["tool_calls"][0]["arguments"]


def test_a_repeated_digit_is_put_right() -> None:
    mended, pairs = restore_near_numbers(
        action(name="gunicorn", size=222), [ChatMessage("user", "Scale gunicorn = 22")]
    )

    assert arguments_of(mended) == {"name": "gunicorn", "size": 22}
    assert pairs == [("222", "22")]


def test_a_tool_results_number_counts_after_the_request() -> None:
    messages = [
        ChatMessage("user", "refund everything on order SI3438"),
        ChatMessage("tool", '{"order_id": "SI3438", "total": 52.4}'),
    ]

    mended, _ = restore_near_numbers(action(id="SI3438", sum=52.44), messages)

    assert arguments_of(mended) == {"id": "SI3438", "sum": 52.4}


@pytest.mark.parametrize(
    ("arguments", "request_text"),
    [
        ({"sum": 257.9}, "refund 257.90 dollars for SO-95285"),  # the same value, written short
        ({"size": 40}, "we need 40 pods"),
        ({"size": 5}, "we need 31 pods and 17 workers"),  # nothing close
        ({"size": 12}, "we need 10 pods or 14 pods"),  # two as close: no guess
        ({"id": 5218, "sum": 5218}, "refund 199.46 for 5218"),  # held by another argument
        ({"force": True}, "reboot web-1 now"),  # a boolean is no number
    ],
)
def test_nothing_is_restored_without_one_close_free_number(
    arguments: dict[str, Any], request_text: str
) -> None:
    assert restore_near_numbers(action(**arguments), [ChatMessage("user", request_text)]) is None
