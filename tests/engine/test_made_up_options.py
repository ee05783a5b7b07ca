"""Optional arguments filled with values nobody gave are dropped."""

from __future__ import annotations

import json
from typing import Any

from agentflow.engine.chat_template import ChatMessage, ToolSpec
from agentflow.engine.made_up_options import without_made_up_options

DEPLOY = ToolSpec(
    "roll_out",
    "Ship a build",
    {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "version": {"type": "string"},
            "max_retries": {"type": "integer"},
            "region": {"type": "string"},
            "env": {"type": "string", "enum": ["dev", "prod"]},
            "dry_run": {"type": "boolean"},
        },
        "required": ["name", "version"],
    },
)


def action(**arguments: Any) -> str:
    return json.dumps(
        {"tool_calls": [{"name": "roll_out", "arguments": arguments}]}, separators=(",", ":")
    )


def asked(text: str) -> list[ChatMessage]:
    return [ChatMessage("user", text)]


def test_optional_values_nobody_gave_are_dropped() -> None:
    text = action(name="kafka", version="1.5.4", max_retries=383749, region="urgent")
    found = without_made_up_options(text, asked("put kafka 1.5.4 on dev"), [DEPLOY])
    assert found == (
        action(name="kafka", version="1.5.4"),
        ["roll_out.max_retries", "roll_out.region"],
    )


def test_required_boolean_and_given_values_stay() -> None:
    text = action(name="redis", version="9.9", env="dev", dry_run=True, max_retries=3.0)
    asked_for = asked("put kafka 1.5.4 on dev, 3 tries, please")
    assert without_made_up_options(text, asked_for, [DEPLOY]) is None
    from_instructions = action(name="kafka", version="1.5.4", region="eu-west")
    assert (
        without_made_up_options(
            from_instructions, asked("put kafka 1.5.4"), [DEPLOY], instructions="Region: EU-West."
        )
        is None
    )


def test_after_a_tool_result_an_unsaid_value_may_be_a_reading_and_stays() -> None:
    text = action(name="kafka", version="1.5.4", max_retries=7)
    went_on = [*asked("put kafka 1.5.4"), ChatMessage("tool", "{}", name="roll_out")]
    assert without_made_up_options(text, went_on, [DEPLOY]) is None
    # but a repeat of a required argument, or a list nobody said, is still made up
    repeat = action(name="kafka", version="1.5.4", max_retries=154, region="kafka")
    assert without_made_up_options(repeat, went_on, [DEPLOY]) == (
        action(name="kafka", version="1.5.4", max_retries=154),
        ["roll_out.region"],
    )


def test_an_id_repeated_as_a_number_and_an_unsaid_list_are_made_up() -> None:
    tagged = ToolSpec(
        "refund",
        "Refund an order",
        {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "max_retries": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["id"],
        },
    )
    text = json.dumps(
        {
            "tool_calls": [
                {
                    "name": "refund",
                    "arguments": {"id": "383749", "max_retries": 383749, "tags": ["reason", "x {"]},
                }
            ]
        }
    )
    mended, names = without_made_up_options(text, asked("refund order 383749"), [tagged])
    assert json.loads(mended)["tool_calls"][0]["arguments"] == {"id": "383749"}
    assert names == ["refund.max_retries", "refund.tags"]
    said = text.replace('["reason", "x {"]', '["vip"]')
    kept = without_made_up_options(said, asked("refund order 383749, tag it vip"), [tagged])
    assert json.loads(kept[0])["tool_calls"][0]["arguments"]["tags"] == ["vip"]


def test_nothing_is_dropped_against_the_schema() -> None:
    text = action(name="kafka", version="1.5.4", max_retries=7)
    needs_retries = {
        "properties": {
            "tool_calls": {"items": {"properties": {"arguments": {"required": ["max_retries"]}}}}
        }
    }
    assert (
        without_made_up_options(text, asked("put kafka 1.5.4"), [DEPLOY], schema=needs_retries)
        is None
    )
    # a tool it does not know, or an answer, is left as it is
    assert without_made_up_options(text, asked("put kafka 1.5.4"), []) is None
    assert without_made_up_options('{"final":"ok"}', asked("hi"), [DEPLOY]) is None


def test_a_value_said_only_inside_a_longer_word_is_made_up() -> None:
    # "3" is no word of the invoice number; "8" of "limit 8" is one
    text = action(name="kafka", version="1.5.4", max_retries=3)
    found = without_made_up_options(text, asked("put kafka 1.5.4, see INV-2023-5427"), [DEPLOY])
    assert found == (action(name="kafka", version="1.5.4"), ["roll_out.max_retries"])
    said = action(name="kafka", version="1.5.4", max_retries=8)
    assert without_made_up_options(said, asked("put kafka 1.5.4, retry 8 times"), [DEPLOY]) is None


def test_an_option_repeating_a_required_argument_is_dropped() -> None:
    text = action(name="kafka", version="1.5.4", region="kafka")
    found = without_made_up_options(text, asked("put kafka 1.5.4 on dev"), [DEPLOY])
    assert found == (action(name="kafka", version="1.5.4"), ["roll_out.region"])


def test_an_option_of_another_kind_than_its_slot_is_dropped() -> None:
    disk = ToolSpec(
        "inspect_disk",
        "Free space on a host",
        {
            "type": "object",
            "properties": {
                "machine": {"type": "string"},
                "directory": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["machine"],
        },
    )

    def check(**arguments: Any) -> str:
        return json.dumps(
            {"tool_calls": [{"name": "inspect_disk", "arguments": arguments}]},
            separators=(",", ":"),
        )

    wrong = check(machine="mq-dev", directory="free")
    found = without_made_up_options(wrong, asked("free space check for mq-dev"), [disk])
    assert found == (check(machine="mq-dev"), ["inspect_disk.directory"])
    right = check(machine="mq-dev", directory="/var/log")
    assert without_made_up_options(right, asked("free space on mq-dev in /var/log"), [disk]) is None


def test_a_word_said_only_as_chatter_is_made_up() -> None:
    text = action(name="kafka", version="1.5.4", region="urgent")
    chatter = asked("put kafka 1.5.4 on dev. it's kind of urgent")
    assert without_made_up_options(text, chatter, [DEPLOY]) == (
        action(name="kafka", version="1.5.4"),
        ["roll_out.region"],
    )
    # said on its own, it is a value
    for meant in ("put kafka 1.5.4 (urgent)", "put kafka 1.5.4, region urgent"):
        assert without_made_up_options(text, asked(meant), [DEPLOY]) is None


def test_an_enum_member_nobody_said_is_made_up_but_a_reasons_member_is_read() -> None:
    # "prod" is a member the schema allows, and nobody asked for it.
    text = action(name="kafka", version="1.5.4", env="prod")
    found = without_made_up_options(text, asked("put kafka 1.5.4 out"), [DEPLOY])
    assert found == (action(name="kafka", version="1.5.4"), ["roll_out.env"])
    assert without_made_up_options(text, asked("put kafka 1.5.4 on prod"), [DEPLOY]) is None
    # A reason's member is read from its phrase, whatever the parameter is named.
    why = {"type": "string", "enum": ["damaged", "late", "other"]}
    for name in ("why", "note"):
        refund = ToolSpec(
            "refund",
            "",
            {
                "type": "object",
                "properties": {"id": {"type": "string"}, name: why},
                "required": ["id"],
            },
        )
        call = {"name": "refund", "arguments": {"id": "A1", name: "other"}}
        text = json.dumps({"tool_calls": [call]})
        request = asked("refund A1 because it was ordered by mistake")
        assert without_made_up_options(text, request, [refund]) is None


def test_a_free_string_reason_nobody_gave_is_made_up() -> None:
    refund = ToolSpec(
        "refund",
        "",
        {
            "type": "object",
            "properties": {"id": {"type": "string"}, "why": {"type": "string"}},
            "required": ["id"],
        },
    )
    call = {"name": "refund", "arguments": {"id": "5578", "why": "city"}}
    found = without_made_up_options(
        json.dumps({"tool_calls": [call]}), asked("refund my purchase 5578"), [refund]
    )
    assert found is not None and found[1] == ["refund.why"]


def test_a_reason_keeps_the_enums_of_its_own_call_only() -> None:
    def spec(name: str, option: str, members: list[str]) -> ToolSpec:
        return ToolSpec(
            name,
            "",
            {
                "type": "object",
                "properties": {"id": {"type": "string"}, option: {"enum": members}},
                "required": ["id"],
            },
        )

    ticket = spec("new_ticket", "level", ["low", "urgent"])
    refund = spec("refund", "note", ["damaged", "other"])
    calls = [
        {"name": "new_ticket", "arguments": {"id": "Login fails", "level": "urgent"}},
        {"name": "refund", "arguments": {"id": "12130", "note": "other"}},
    ]
    request = asked(
        'ticket please: "Login fails" plus refund 12130? since it was ordered by mistake'
    )
    found = without_made_up_options(json.dumps({"tool_calls": calls}), request, [ticket, refund])
    assert found is not None and found[1] == ["new_ticket.level"]
