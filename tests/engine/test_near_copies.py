"""Values a call wrote almost right are put back from the request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentflow.engine.chat_template import ChatMessage
from agentflow.engine.near_copies import restore_near_copies


def action(*calls: tuple[str, dict[str, Any]]) -> str:
    body = [{"name": n, "arguments": a} for n, a in calls]
    return json.dumps({"tool_calls": body}, separators=(",", ":"))


def asked(text: str) -> list[ChatMessage]:
    return [ChatMessage("user", "hi"), ChatMessage("user", text)]


@pytest.mark.parametrize(
    ("request_text", "written", "meant"),
    [
        ("can #86669 be redirected to 111 Oak Ave?", "11669", "#86669"),
        ("Message hokafor@shop.net saying hi", "kaka@shop.net", "hokafor@shop.net"),
        ("is my package ET3453 out for delivery?", "33453", "ET3453"),
    ],
)
def test_a_value_written_almost_right_is_put_back(
    request_text: str, written: str, meant: str
) -> None:
    found = restore_near_copies(action(("track", {"id": written})), asked(request_text))
    assert found == (action(("track", {"id": meant})), [(written, meant)])


def test_values_the_conversation_holds_are_left_alone() -> None:
    messages = [ChatMessage("user", "my old order was 11669"), *asked("track #86669")]
    assert restore_near_copies(action(("track", {"id": "11669"})), messages) is None
    from_instructions = restore_near_copies(
        action(("track", {"id": "11669"})), asked("track #86669"), instructions="Order 11669."
    )
    assert from_instructions is None


def test_a_value_already_held_by_a_call_is_not_used_again() -> None:
    text = action(("track", {"id": "#86669"}), ("track", {"id": "86660"}))
    assert restore_near_copies(text, asked("track #86669 please")) is None


def test_values_far_from_every_request_value_are_left_alone() -> None:
    two_left = asked("track #86669 and ET3453")
    assert restore_near_copies(action(("track", {"id": "qwerty"})), two_left) is None
    prose = action(("track", {"id": "#86669", "note": "the customer sounds quite upset"}))
    assert restore_near_copies(prose, asked("track #86669, customer ET3453")) is None
    # too short to tell, or no string at all
    assert restore_near_copies(action(("track", {"id": "86"})), asked("track #86669")) is None
    assert restore_near_copies(action(("track", {"n": 11669})), asked("track #86669")) is None


def test_each_request_value_is_restored_once() -> None:
    text = action(("reset", {"targets": ["nodf-7", "nobe-7"]}))
    found = restore_near_copies(text, asked("restart node-7"))
    assert found == (action(("reset", {"targets": ["node-7", "nobe-7"]})), [("nodf-7", "node-7")])


def test_nothing_is_restored_where_the_schema_refuses_it_or_the_request_is_past() -> None:
    text = action(("track", {"id": "11669"}))
    numeric = {
        "properties": {
            "tool_calls": {
                "items": {
                    "properties": {"arguments": {"properties": {"id": {"pattern": "^[0-9]+$"}}}}
                }
            }
        }
    }
    assert restore_near_copies(text, asked("track #86669"), schema=numeric) is None
    went_on = [*asked("track #86669"), ChatMessage("tool", "{}", name="track")]
    assert restore_near_copies(text, went_on) is None
    assert restore_near_copies('{"final":"done"}', asked("track #86669")) is None


@pytest.mark.parametrize(
    ("request_text", "written", "meant"),
    [
        # the miscopy holds the request's value itself: that must not count as a call holding it
        ("Can you void 59133? and send a confirmation", "591333", "59133"),
        ("check haproxy's journal on web-int-15", "web-int-15.lan", "web-int-15"),
        # cut inside a word: the conversation holds "omore" only as part of "omoreau"
        ("Turn off login omoreau", "omore", "omoreau"),
        # written with the sentence's full stop
        ("turn off login joao. it's kind of urgent", "joao.", "joao"),
    ],
)
def test_a_miscopy_that_holds_or_cuts_its_value_is_put_back(
    request_text: str, written: str, meant: str
) -> None:
    found = restore_near_copies(action(("act", {"id": written})), asked(request_text))
    assert found == (action(("act", {"id": meant})), [(written, meant)])


def test_a_value_said_as_a_whole_word_or_held_by_another_argument_stays() -> None:
    # "SO-14246" says "14246" as a word of its own; the request's value is not guessed
    assert restore_near_copies(action(("act", {"id": "14246"})), asked("track SO-14246")) is None
    # "59133" is held by the other argument, so the near miss is no copy of it
    text = action(("act", {"id": "59133", "ref": "591333"}))
    assert restore_near_copies(text, asked("void 59133 now")) is None


def test_a_value_no_request_value_is_close_to_may_be_a_run_of_the_requests_words() -> None:
    # the street number was taken from the order id: "174 Main St" is the run of three words
    request = asked("can 757246 be redirected to 174 Main St, Lisbon 39206?")
    address = {"street": "757 Main St", "city": "Lisbon", "zip": "39206"}
    text = action(("redirect", {"id": "757246", "address": address}))
    restored = {**address, "street": "174 Main St"}
    assert restore_near_copies(text, request) == (
        action(("redirect", {"id": "757246", "address": restored})),
        [("757 Main St", "174 Main St")],
    )
    # runs of as many words, all far from the written value: no copy of any
    unlike = action(("redirect", {"id": "757246", "note": "qwerty uiop"}))
    assert restore_near_copies(unlike, request) is None


@pytest.mark.parametrize(
    ("request_text", "arguments", "written", "meant"),
    [
        (
            "Can GO3939 be redirected to 207 Elm Street?",
            {"street": "207 Elm Street"},
            "207739",
            "GO3939",
        ),
        (
            "Set email kberg@inbox.dev on account c1848",
            {"email": "kberg@inbox.dev"},
            "c1@inbox.dev",
            "c1848",
        ),
        ("Turn off login llopez - asap please", {}, "Marure", "llopez"),
    ],
)
def test_a_short_stray_value_is_the_one_value_the_calls_left(
    request_text: str, arguments: dict[str, Any], written: str, meant: str
) -> None:
    text = action(("act", {"id": written, **arguments}))
    found = restore_near_copies(text, asked(request_text))
    assert found == (action(("act", {"id": meant, **arguments})), [(written, meant)])
