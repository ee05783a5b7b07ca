"""One list, one call: calls of a tool that share out one list the request gives are joined."""

from __future__ import annotations

import json
from typing import Any

from agentflow.engine.action_mending import JOINED, mend_action
from agentflow.engine.chat_template import ChatMessage, ToolSpec
from agentflow.engine.list_calls import merged_list_calls


def reboot(*targets: str, **more: Any) -> dict[str, Any]:
    return {"name": "reset_servers", "arguments": {"targets": list(targets), **more}}


def action(*calls: dict[str, Any]) -> str:
    return json.dumps({"tool_calls": list(calls)})


def asked(request: str) -> list[ChatMessage]:
    return [ChatMessage("user", request)]


def calls_of(text: str) -> list[dict[str, Any]]:
    return json.loads(text)["tool_calls"]


def test_two_calls_sharing_out_one_list_become_one_in_the_requests_order() -> None:
    request = asked("restart hosts db-stg, node24 and mail-int12 please forcefully, ok?")
    text = action(
        reboot("db-stg", "node24", immediate=True), reboot("db-stg", "mail-int12", immediate=True)
    )
    found = merged_list_calls(text, request)
    assert found is not None
    joined, names = found
    assert calls_of(joined) == [reboot("db-stg", "node24", "mail-int12", immediate=True)]
    assert names == ["reset_servers"]


def test_strings_that_are_no_item_of_the_list_go_with_the_joined_call() -> None:
    request = asked("Restart hosts mail-eu and app-stg please")
    text = action(reboot("mail-eu", "app-stg"), reboot("hosts", "app-stg", "app"))
    found = merged_list_calls(text, request)
    assert found is not None
    assert calls_of(found[0]) == [reboot("mail-eu", "app-stg")]


def test_two_lists_stay_two_calls() -> None:
    request = asked(
        "node-stg-20, search-us & app-12 need a reboot plus restart hosts gw-1 & mail.lan"
    )
    text = action(
        reboot("node-stg-20", "search-us", "app-12"),
        reboot("node-stg", "app-12"),  # a share of the first list: joined into the first call
        reboot("gw-1", "mail.lan"),
    )
    found = merged_list_calls(text, request)
    assert found is not None
    assert calls_of(found[0]) == [
        reboot("node-stg-20", "search-us", "app-12"),
        reboot("gw-1", "mail.lan"),
    ]
    assert merged_list_calls(action(calls_of(found[0])[0], calls_of(found[0])[1]), request) is None


def test_calls_with_other_arguments_that_differ_are_not_joined() -> None:
    request = asked("restart hosts a-1, b-2 and c-3, b-2 forcefully")
    text = action(reboot("a-1", "c-3"), reboot("b-2", immediate=True))
    assert merged_list_calls(text, request) is None


def test_nothing_changes_without_a_list_or_after_a_tool_result() -> None:
    text = action(reboot("db-1"), reboot("db-2"))
    assert merged_list_calls(text, asked("reboot db-1. then reboot db-2")) is None
    after = [*asked("restart hosts db-1 and db-2"), ChatMessage("tool", "{}", name="reset_servers")]
    assert merged_list_calls(action(reboot("db-1"), reboot("db-2")), after) is None


def test_mending_joins_them_and_says_so() -> None:
    tool = ToolSpec(
        "reset_servers",
        "Power-cycle a list of servers",
        {
            "type": "object",
            "properties": {"targets": {"type": "array", "items": {"type": "string"}}},
            "required": ["targets"],
        },
    )
    request = asked("restart hosts db-stg, node24 and mail-int12 please")
    text, notes = mend_action(
        action(reboot("db-stg", "node24"), reboot("db-stg", "mail-int12")), request, [tool]
    )
    assert calls_of(text) == [reboot("db-stg", "node24", "mail-int12")]
    assert f"{JOINED} reset_servers" in notes
