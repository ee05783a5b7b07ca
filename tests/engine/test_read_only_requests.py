"""Read-only requests: a question calls for a tool that reads, not one that changes."""

from __future__ import annotations

import pytest

from agentflow.engine.argument_fit import argument_fit
from agentflow.engine.chat_template import ToolSpec
from agentflow.engine.read_only_requests import (
    changes_state,
    changing_tools,
    only_asks,
    read_only,
)

ID = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
FIND_ORDER = ToolSpec("findOrder", "Return order details", ID)
STOP_ORDER = ToolSpec("order_stop", "Stop an order before shipping", ID)
FIX_ADDRESS = ToolSpec("delivery_address_fix", "Update the delivery address of an order", ID)
TRACK = ToolSpec("parcel_locate", "Carrier tracking for an order", ID)
TOOLS = [FIND_ORDER, STOP_ORDER, FIX_ADDRESS, TRACK]


@pytest.mark.parametrize(
    ("tool", "changes"),
    [
        (FIND_ORDER, False),
        (STOP_ORDER, True),
        (FIX_ADDRESS, True),
        (TRACK, False),
        (ToolSpec("show_unit_status", "Restart nothing", ID), False),  # a read word wins
        (ToolSpec("unit_cycle", "", ID), True),
        (ToolSpec("mevagu", "Cancel an order that has not shipped", ID), True),
        (ToolSpec("mevagu", "", ID), False),  # made-up words say nothing
    ],
)
def test_a_tool_changes_state_by_its_name_or_else_its_description(
    tool: ToolSpec, changes: bool
) -> None:
    assert changes_state(tool) is changes


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("Any news on my order 6644?", True),
        ("is my package 4901 out for delivery?", True),
        ("Status of ST8160?", True),
        ("good morning. tracking info for ORD-15237 please", True),
        ("I want to know about my purchase 76244", True),
        ("how is mysql doing on mq-us30 it's kind of urgent", True),
        ("do we know ines35@example.org?", True),
        # asks for a change, in so many words or by a modal
        ("can you void 524388?", False),
        ("Can I get $366.94 back for A46144?", False),
        ("order 2246 needs to be cancelled", False),
        ("can karl.silva get the viewer role?", False),
        ("lena.lee needs admin rights, ok?", False),
        # one clause asks, another asks for a change
        ("Status of 314535? and then cancel 5678", False),
        ("how is vault doing on search-us. scale vault = 3", False),
        # a word inside quotes is an argument
        ('any news on ticket "cancel button broken" for 5512?', True),
        # nothing holds a value: nothing to read
        ("how are you?", False),
    ],
)
def test_a_request_is_read_only_when_every_clause_with_a_value_only_asks(
    request_text: str, expected: bool
) -> None:
    assert read_only(request_text) is expected


def test_a_greeting_and_a_trailing_ok_do_not_make_a_question() -> None:
    assert only_asks("hi team, how is redis doing on db-1")
    assert not only_asks("restart hosts a-1 and b-2, ok?")


def test_only_tools_that_change_are_named_and_only_beside_tools_that_read() -> None:
    assert changing_tools("Any news on my order 6644?", TOOLS) == {
        "order_stop",
        "delivery_address_fix",
    }
    assert changing_tools("cancel 6644 please", TOOLS) == set()
    assert changing_tools("Any news on my order 6644?", [STOP_ORDER, FIX_ADDRESS]) == set()


def test_argument_fit_counts_a_changing_tool_one_misfit_for_a_question() -> None:
    fit = argument_fit("hey, so any news on my order 42527?", TOOLS)
    assert fit == {
        "findOrder": 0.0,
        "order_stop": -1.0,
        "delivery_address_fix": -1.0,
        "parcel_locate": 0.0,
    }
    assert set(argument_fit("please stop order 42527", TOOLS).values()) == {0.0}
