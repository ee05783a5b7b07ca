"""A message that asks for two things splits into two requests, each decoded on its own."""

from __future__ import annotations

import json

import pytest

from agentflow.engine.chat_template import ToolSpec
from agentflow.engine.constraints.actions import action_schema
from agentflow.engine.request_parts import MAX_PARTS, SplitRequest, request_parts, split_request

TOOLS = [
    ToolSpec(
        "get_order",
        "Look up an order",
        {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    ),
    ToolSpec(
        "cancel_order",
        "Cancel an order",
        {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    ),
]
SCHEMA = action_schema(TOOLS, None)


@pytest.mark.parametrize(
    ("request_text", "parts"),
    [
        (
            "Status of 2537? plus can you void ORD-91016? and send a confirmation thanks a lot",
            [
                "Status of 2537?",
                "plus can you void ORD-91016? and send a confirmation thanks a lot",
            ],
        ),
        # Clauses without values stay with the part before them, or the first part.
        (
            "good morning. Cancel 93799 for me and send a confirmation. "
            'I need a reminder "rotate the api keys" on 2026-07-23',
            [
                "good morning. Cancel 93799 for me and send a confirmation.",
                'I need a reminder "rotate the api keys" on 2026-07-23',
            ],
        ),
        # The joiner between two requests stays with the first (measured: leaving
        # it out fixed fewer cases than it broke).
        (
            "Search: sso login and then search: refund policy",
            ["Search: sso login and then", "search: refund policy"],
        ),
        # One request, however many clauses and values.
        ("I moved, send 505768 to 112 Cedar Ave, Utrecht 44811. thanks", None),
        ("restart worker-eu5 and cache-dev please", None),  # a list, not two requests
        ("thanks, bye", None),
    ],
)
def test_a_message_splits_where_a_second_request_starts(
    request_text: str, parts: list[str] | None
) -> None:
    found = request_parts(request_text)
    assert found == (parts or [request_text])
    split = split_request(request_text, SCHEMA)
    assert (split.parts if split else None) == (tuple(parts) if parts else None)


def test_a_split_needs_room_for_a_call_per_part() -> None:
    request = "Status of 2537? plus cancel ORD-91016"
    assert split_request(request) is not None
    assert split_request(request, action_schema(TOOLS, None, parallel_calls=False)) is None
    many = ". ".join(f"look up {n}" for n in range(1000, 1000 + MAX_PARTS + 1))
    assert len(request_parts(many)) == MAX_PARTS + 1
    assert split_request(many, SCHEMA) is None  # decoded whole


def call(name: str, order: str) -> dict[str, object]:
    return {"name": name, "arguments": {"id": order}}


def action(*calls: dict[str, object]) -> str:
    return json.dumps({"tool_calls": list(calls)})


def test_the_parts_calls_join_in_order_without_repeats() -> None:
    split = SplitRequest(("Status of 2537?", "cancel ORD-91016"))
    first, second = call("get_order", "2537"), call("cancel_order", "ORD-91016")
    joined = split.joined([action(first), action(second, first)], SCHEMA)
    assert joined is not None
    assert json.loads(joined) == {"tool_calls": [first, second]}
    # A part answered instead of called: the message is decoded whole instead.
    assert split.joined([action(first), '{"final":"Which order?"}'], SCHEMA) is None
    assert split.joined([action(first), "not json"], SCHEMA) is None
    one_call = action_schema(TOOLS, None, parallel_calls=False)
    assert split.joined([action(first), action(second)], one_call) is None
    with pytest.raises(ValueError, match="2 parts, 1 actions"):
        split.joined([action(first)])


def test_a_part_whose_calls_take_none_of_its_values_sends_the_message_back_whole() -> None:
    split = SplitRequest(("Any errors in redis on search-int-3?", "57 lines"))
    first = {"name": "get_log_lines", "arguments": {"hostname": "search-int-3"}}
    run_on = {"name": "get_log_lines", "arguments": {"hostname": "57}}]}count}}]}}}]}}}]}"}}
    assert split.joined([action(first), action(run_on)], SCHEMA) is None
    # a value written as the part says it, give or take a sign, joins
    split = SplitRequest(("Status of 2537?", "refund $12.50 on 5084"))
    refund = {"name": "refund", "arguments": {"id": "5084", "amount": 12.5}}
    assert split.joined([action(call("get_order", "2537")), action(refund)]) is not None


def test_a_part_whose_call_miscopies_its_value_still_joins() -> None:
    split = SplitRequest(("Do we know chensmith@fastmail.fm?.", "put CUST-193370 on free"))
    lookup = {"name": "get_user", "arguments": {"contact": "ifmit@fastmail.fm"}}
    switch = {"name": "switch_plan", "arguments": {"id": "CUST-193370", "plan": "free"}}
    assert split.joined([action(lookup), action(switch)]) is not None
    # a value with nothing of the part's in it is no copy of it
    other = {"name": "get_user", "arguments": {"contact": "nobody"}}
    assert split.joined([action(other), action(switch)]) is None


def test_a_clause_naming_a_listed_member_is_a_request_of_its_own() -> None:
    role = {"type": "string", "enum": ["viewer", "editor", "admin"]}
    assign = ToolSpec(
        "assign_role",
        "Give a user a role",
        {
            "type": "object",
            "properties": {"account": {"type": "string"}, "group": role},
            "required": ["account", "group"],
        },
    )
    schema = action_schema([*TOOLS, assign], None)
    request = "Assign role admin to user mmartin. hana needs editor rights"

    split = split_request(request, schema)

    assert split is not None
    assert split.parts == ("Assign role admin to user mmartin.", "hana needs editor rights")
    assert split_request(request, SCHEMA) is None  # no tool lists "editor"
    # the part's call must take the member it names
    first = {"name": "assign_role", "arguments": {"account": "mmartin", "group": "admin"}}
    again = {"name": "assign_role", "arguments": {"account": "hana", "group": "viewer"}}
    right = {"name": "assign_role", "arguments": {"account": "hana", "group": "editor"}}
    assert split.joined([action(first), action(again)], schema) is None
    assert split.joined([action(first), action(right)], schema) is not None
    # a clause giving a reason is no request, whatever member it names
    because = "Assign role admin to user mmartin. since editor is too much"
    assert split_request(because, schema) is None
