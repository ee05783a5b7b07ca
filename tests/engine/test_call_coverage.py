"""Which parts of a request an action's calls serve, and the follow-up call owed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentflow.engine.call_coverage import (
    FollowUp,
    clause_values,
    clauses,
    follow_up,
    says,
    untouched,
    without_redundant_calls,
)
from agentflow.engine.chat_template import ChatMessage

TWO_ASKS = "send me invoice INV-2023-1670. downgrade cus_457 to enterprise, thanks"


def action(*calls: tuple[str, dict[str, Any]]) -> str:
    body = [{"name": n, "arguments": a} for n, a in calls]
    return json.dumps({"tool_calls": body}, separators=(",", ":"))


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        (TWO_ASKS, ["send me invoice INV-2023-1670.", "downgrade cus_457 to enterprise, thanks"]),
        ("cancel 8977 plus refund 12 on 5084", ["cancel 8977", "refund 12 on 5084"]),
        ("look up 2271 and then cancel it", ["look up 2271", "cancel it"]),
        ("reset 2271, and notify bo@x.io", ["reset 2271", "notify bo@x.io"]),
        ("check db-1 and tell me\nwhat's up", ["check db-1", "tell me", "what's up"]),
        # a bare "and" or "&" before a value joins a list, not two requests
        ("restart worker-eu5 and cache-dev please", ["restart worker-eu5 and cache-dev please"]),
        ("Mq-eu & api-prod7 need a reboot", ["Mq-eu & api-prod7 need a reboot"]),
    ],
)
def test_a_request_splits_into_clauses_at_sentence_ends_and_joiners(
    request_text: str, expected: list[str]
) -> None:
    assert clauses(request_text) == expected


def test_a_clause_holds_its_quoted_text_and_value_like_tokens() -> None:
    clause = 'ticket for ana\'s host web-3.lan: "Disk full on node-7" (sev2), about €325.'
    assert clause_values(clause) == ["Disk full on node-7", "web-3.lan", "sev2", "€325"]
    assert clause_values("can you reset inovak@shop.net's login") == ["inovak@shop.net"]
    assert clause_values("thanks a lot") == []


@pytest.mark.parametrize(
    ("clause", "expected"),
    [
        ("turn off login joao", ["joao"]),
        ("suspend user eli now", ["eli"]),
        ("the user cannot log in", []),
        ("search: log retention - thanks", ["log retention"]),
        ("look up api rate limits in the knowledge base", ["api rate limits"]),
        ("search the docs for vpn setup please", ["vpn setup"]),
        ("how warm is it in Madrid right now", ["Madrid"]),
        ("Turin weather?, as soon as possible", ["Turin"]),
        # a plain word where a machine stands, and a path
        ("read postgres logs from db.", ["db"]),
        ("disk space on cache please", ["cache"]),
        ("disk space on db please especially /home", ["/home"]),  # a path is value-like
        ("free space check for build", ["build"]),
        ("thanks for the help", []),
        ("since it was broken on arrival", []),  # a reason names no place
        ("thanks for waiting", []),
        ('Ticket: "High latency" on web-3', ["High latency", "web-3"]),  # quoted, not proper
        # with ids or numbers, a clause's words are not values: "Oak" is in both addresses
        ("can 905221 go to 73 Oak Ave, Lyon 48272", ["905221", "73", "48272"]),
    ],
)
def test_names_search_terms_and_proper_nouns_are_values_too(
    clause: str, expected: list[str]
) -> None:
    assert clause_values(clause) == expected


def test_a_clause_with_a_name_only_is_owed_a_call() -> None:
    deploy = {"name": "roll_out", "arguments": {"name": "kafka", "build_version": "1.5.4"}}
    request = "Put kafka 1.5.4 on dev plus turn off login hbrown - asap please"
    assert untouched(request, [deploy]) == ("turn off login hbrown - asap please", ("hbrown",))


def test_the_clauses_no_call_touches_are_left() -> None:
    calls = [{"name": "bill_show", "arguments": {"id": "INV-2023-1670"}}]
    part, values = untouched(TWO_ASKS, calls)
    assert part == "downgrade cus_457 to enterprise, thanks"
    assert values == ("cus_457",)


def test_numbers_and_lists_count_as_held_values() -> None:
    request = "refund €325 for 80809 plus restart hosts a-1 and b-2"
    refund = {"name": "refund", "arguments": {"id": "80809", "sum": 325}}
    restart = {"name": "restart", "arguments": {"targets": ["a-1", "b-2"], "now": True}}
    assert untouched(request, [refund]) == ("restart hosts a-1 and b-2", ("a-1", "b-2"))
    assert untouched(request, [refund, restart]) == ("", ())


def test_nothing_is_owed_when_the_calls_touch_no_clause() -> None:
    # A call that misread every value is a wrong call, not half of the request.
    calls = [{"name": "bill_show", "arguments": {"id": "INV-9"}}]
    assert untouched(TWO_ASKS, calls) == ("", ())


def test_clauses_without_values_are_not_owed_a_call() -> None:
    calls = [{"name": "stop_order", "arguments": {"id": "69763"}}]
    assert untouched("cancel 69763 for me. and send a confirmation", calls) == ("", ())


def test_a_follow_up_names_the_part_left() -> None:
    first = action(("bill_show", {"id": "INV-2023-1670"}))
    follow = follow_up(first, TWO_ASKS)
    assert follow == FollowUp(first, "downgrade cus_457 to enterprise, thanks", ("cus_457",))


@pytest.mark.parametrize(
    "text",
    [
        '{"final":"done"}',
        '{"tool_calls":[]}',
        "not json",
        action(("bill_show", {"id": "INV-2023-1670"}), ("plan", {"client_id": "cus_457"})),
    ],
)
def test_no_follow_up_for_answers_broken_text_or_whole_actions(text: str) -> None:
    assert follow_up(text, TWO_ASKS) is None


@pytest.fixture
def owed() -> FollowUp:
    follow = follow_up(action(("bill_show", {"id": "INV-2023-1670"})), TWO_ASKS)
    assert follow is not None
    return follow


def test_the_calls_decoded_for_the_part_left_go_after_the_actions_own(owed: FollowUp) -> None:
    tier = ("switch_tier", {"client_id": "cus_457"})
    merged = owed.merged(action(tier))
    assert merged == action(("bill_show", {"id": "INV-2023-1670"}), tier)
    # A call the action already holds is not repeated.
    assert owed.merged(action(("bill_show", {"id": "INV-2023-1670"}), tier)) == merged


@pytest.mark.parametrize(
    "text",
    [
        action(("bill_show", {"id": "INV-2023-1670"})),  # the same call again
        action(("switch_tier", {"client_id": "cus_9"})),  # a value the request never held
        # a run-on value that only contains the value left
        action(("switch_tier", {"client_id": "cus_457}}]}tier}}]}}}]}}}]}}}]}}}]}"})),
        '{"final":"done"}',
        "broken",
    ],
)
def test_calls_that_use_no_value_left_are_not_merged(owed: FollowUp, text: str) -> None:
    assert owed.merged(text) is None


def test_a_merged_action_must_fit_the_schema(owed: FollowUp) -> None:
    one_call = {"properties": {"tool_calls": {"type": "array", "maxItems": 1}}}
    two_calls = {"properties": {"tool_calls": {"type": "array", "maxItems": 2}}}
    assert not owed.fits(one_call)
    assert owed.fits(two_calls)
    tier = action(("switch_tier", {"client_id": "cus_457"}))
    assert owed.merged(tier, one_call) is None
    assert owed.merged(tier, two_calls) is not None


def test_a_spaced_action_is_merged_too() -> None:
    spaced = '{ "tool_calls": [ {"name": "bill_show", "arguments": {"id": "INV-2023-1670"}} ] }'
    follow = follow_up(spaced, TWO_ASKS)
    assert follow is not None
    merged = follow.merged(action(("switch_tier", {"client_id": "cus_457"})))
    assert merged is not None
    assert json.loads(merged)["tool_calls"][1]["arguments"] == {"client_id": "cus_457"}


SHOW = ("bill_show", {"id": "INV-2023-1670"})
TIER = ("switch_tier", {"client_id": "cus_457"})


def asked(text: str = TWO_ASKS) -> list[ChatMessage]:
    return [ChatMessage("user", "hello"), ChatMessage("user", text)]


@pytest.mark.parametrize(
    "extra",
    [
        ("bill_show", {"id": "INV-2023-1670", "full": True}),  # repeats the first call's value
        ("switch_tier", {"client_id": "cus_9", "level": "free"}),  # values of its own
    ],
    ids=["repeat", "made-up"],
)
def test_a_call_that_takes_no_new_value_is_dropped(extra: tuple[str, dict[str, Any]]) -> None:
    assert without_redundant_calls(action(SHOW, extra, TIER), asked()) == action(SHOW, TIER)
    assert without_redundant_calls(action(SHOW, TIER), asked()) is None  # nothing to drop


def test_values_from_anywhere_in_the_conversation_count_as_new() -> None:
    look = ("get_user", {"account": "acct-77"})
    conversation = [ChatMessage("tool", '{"account":"acct-77"}', name="x"), *asked()]
    assert without_redundant_calls(action(SHOW, look, TIER), conversation) is None
    from_instructions = without_redundant_calls(
        action(SHOW, look, TIER), asked(), instructions="Our account is acct-77."
    )
    assert from_instructions is None
    assert without_redundant_calls(action(SHOW, look, TIER), asked()) == action(SHOW, TIER)


def test_calls_are_dropped_only_where_the_rest_serve_the_whole_request() -> None:
    # Without the made-up call nothing serves "downgrade cus_457": it stays.
    made_up = ("switch_tier", {"client_id": "cus_9"})
    assert without_redundant_calls(action(SHOW, made_up), asked()) is None
    # Calls without values (no arguments, or flags only) are never redundant.
    assert without_redundant_calls(action(SHOW, ("ping", {}), TIER), asked()) is None


def test_only_an_action_just_after_its_request_is_pruned() -> None:
    text = action(SHOW, SHOW, TIER)
    went_on = [*asked(), ChatMessage("tool", "{}", name="bill_show")]
    assert without_redundant_calls(text, went_on) is None
    three_calls = {"properties": {"tool_calls": {"minItems": 3}}}
    assert without_redundant_calls(text, asked(), schema=three_calls) is None
    assert without_redundant_calls('{"final":"ok"}', asked()) is None


@pytest.mark.parametrize(
    ("said", "value", "whole"),
    [
        ("turn off login omoreau", "omoreau", True),
        ("turn off login omoreau", "omore", False),
        ("track so-14246 please", "14246", True),
        ("refund $320.99 now", "320.99", True),
        ("see inv-2023-5427", "3", False),
        ("message ines8@acme.io", "INES8@acme.io", True),
    ],
)
def test_a_value_is_said_only_as_a_whole_word(said: str, value: str, whole: bool) -> None:
    assert says(said, value) is whole


def test_a_number_is_not_said_by_a_longer_number() -> None:
    assert not says("refund $343.94 please", "343")
    assert not says("refund $343.94 please", "94")
    assert says("refund $343.94, please", "343.94")


@pytest.mark.parametrize(
    ("clause", "values"),
    [
        ("Lisbon weather?", ["Lisbon"]),
        ("Lyon WEATHER?", ["Lyon"]),
        ("How are you?", []),
        ("Any news?", []),
        ("Thanks a lot", []),  # no question
        ("Paris weather today, please?", []),  # longer than three words
    ],
)
def test_a_short_question_led_by_a_name_holds_it(clause: str, values: list[str]) -> None:
    assert clause_values(clause) == values


def test_chatter_a_call_takes_is_no_new_value() -> None:
    request = [ChatMessage("user", 'New ticket "Cron job nginx not running". it\'s kind of urgent')]
    ticket = ("new_ticket", {"headline": "Cron job nginx not running"})
    again = ("new_ticket", {"headline": "urgent"})
    assert without_redundant_calls(action(ticket, again), request) == action(ticket)
    # a plain word the request gives as a value is one: "disk space on lb"
    disk = [ChatMessage("user", 'log a sev1 for "Printer offline" and then disk space on lb')]
    both = action(("raise", {"name": "Printer offline"}), ("disk", {"machine": "lb"}))
    assert without_redundant_calls(both, disk) is None


def test_a_piece_of_a_word_is_no_new_value() -> None:
    request = [ChatMessage("user", 'notify eli@acme.io: "the build is green again"')]
    note = ("notify_email", {"address": "eli@acme.io", "content": "the build is green again"})
    again = ("notify_email", {"address": "re", "content": "the build is green again"})
    assert without_redundant_calls(action(note, again), request) == action(note)


def test_a_one_digit_number_is_a_new_value() -> None:
    request = [
        ChatMessage("user", "how is node-exporter doing on mail-prod-23. scale node-exporter = 3")
    ]
    status = ("show_status", {"machine": "mail-prod-23", "name": "node-exporter"})
    scale = ("set_workers", {"name": "node-exporter", "size": 3})
    assert without_redundant_calls(action(status, scale), request) is None  # "3" is new
