"""List arguments become the lists the request gives."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentflow.engine.action_mending import LISTED, mend_action
from agentflow.engine.chat_template import ChatMessage
from agentflow.engine.listed_values import complete_lists, request_lists


def action(*calls: tuple[str, dict[str, Any]]) -> str:
    body = [{"name": n, "arguments": a} for n, a in calls]
    return json.dumps({"tool_calls": body}, separators=(",", ":"))


def asked(text: str) -> list[ChatMessage]:
    return [ChatMessage("user", text)]


@pytest.mark.parametrize(
    ("request_text", "lists"),
    [
        ("api27, search-20, lb-qa need a reboot", [("api27", "search-20", "lb-qa")]),
        ("reset x@y.io's login plus worker & gw-stg need a reboot", [("worker", "gw-stg")]),
        ("restart gw-1, db-2, and cache.lan.", [("gw-1", "db-2", "cache.lan")]),
        ("greetings, auth-int-08, cache-us-4 need a reboot", [("auth-int-08", "cache-us-4")]),
        # words alone are no list, nor is a joiner between requests
        ("put redis 7.6.9 on qa and then push etcd", []),
        ("cats and dogs", []),
    ],
)
def test_a_request_gives_runs_of_values_as_lists(
    request_text: str, lists: list[tuple[str, ...]]
) -> None:
    assert request_lists(request_text) == lists


@pytest.mark.parametrize(
    ("written", "made"),
    [
        (["api27", "search-20"], ["api27", "search-20", "lb-qa"]),  # the last one left out
        (["api27", "search-lb", "lb-qa"], ["api27", "search-20", "lb-qa"]),  # two fused
        (["lb-qa", "api27", "rmalipez", "search-20"], ["api27", "search-20", "lb-qa"]),
    ],
)
def test_a_list_argument_becomes_the_requests_list(written: list[str], made: list[str]) -> None:
    text = action(("reboot", {"hosts": written}))
    found = complete_lists(text, asked("api27, search-20, lb-qa need a reboot please"))
    assert found == (action(("reboot", {"hosts": made})), [(written, made)])


def test_lists_holding_other_values_or_lent_items_stay() -> None:
    request = asked("api27, search-20, lb-qa need a reboot; also check disk on db-9")
    # db-9 is a value of the request's other clause: the list is not made up
    mixed = action(("reboot", {"hosts": ["api27", "db-9"]}))
    assert complete_lists(mixed, request) is None
    # another call holds the item the list lacks
    shared = action(("reboot", {"hosts": ["api27", "search-20"]}), ("ping", {"host": "lb-qa"}))
    assert complete_lists(shared, request) is None
    # nothing of the run, or the run already
    assert complete_lists(action(("reboot", {"hosts": ["xx-1"]})), request) is None
    whole = action(("reboot", {"hosts": ["api27", "search-20", "lb-qa"]}))
    assert complete_lists(whole, request) is None


def test_a_list_is_completed_only_after_its_request_and_within_the_schema() -> None:
    text = action(("reboot", {"hosts": ["api27", "search-20"]}))
    went_on = [*asked("api27, search-20, lb-qa need a reboot"), ChatMessage("tool", "{}")]
    assert complete_lists(text, went_on) is None
    at_most_two = {
        "properties": {
            "tool_calls": {
                "items": {"properties": {"arguments": {"properties": {"hosts": {"maxItems": 2}}}}}
            }
        }
    }
    assert complete_lists(text, asked("api27, search-20, lb-qa reboot"), at_most_two) is None


def test_mending_notes_the_completed_list() -> None:
    text = action(("reboot", {"hosts": ["api27", "search-20"]}))
    mended, notes = mend_action(text, asked("api27, search-20, lb-qa need a reboot"), [])
    assert json.loads(mended)["tool_calls"][0]["arguments"]["hosts"][-1] == "lb-qa"
    assert notes == [f"{LISTED} ['api27', 'search-20'] → ['api27', 'search-20', 'lb-qa']"]
