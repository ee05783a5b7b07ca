"""Tool relevance: the words a request shares with each tool, as tool-name bonuses."""

from __future__ import annotations

import math

import pytest

from agentflow.engine.chat_template import ToolSpec
from agentflow.engine.tool_relevance import (
    DESCRIPTION_WEIGHT,
    MEMBER_WEIGHT,
    enum_members,
    holds_values,
    relevance,
    request_words,
    same_word,
    tool_bonuses,
    words,
)

TOOLS = [
    ToolSpec("credentials_recover", "Start a password reset for an email"),
    ToolSpec("deactivateLogin", "Suspend an account"),
    ToolSpec("find_order", "Return order details"),
    ToolSpec("locate-shipment", "Carrier tracking for an order"),
]


def test_identifiers_split_into_lower_case_words_without_stop_words() -> None:
    assert words("deactivateLogin") == ["deactivate", "login"]
    assert words("locate-shipment") == ["locate", "shipment"]
    assert words("get_order_by_ID") == ["order"]  # "get", "by" and "id" say nothing
    assert words("Could you please CHECK the disk") == ["check", "disk"]
    assert words("Réserver une chambre") == ["réserver", "une", "chambre"]  # any script


def test_words_match_their_inflections_and_long_shared_stems_only() -> None:
    assert same_word("refund", "refunds") and same_word("tracking", "track")
    assert same_word("deactivate", "deactivation")
    assert not same_word("back", "backup")  # a prefix is not an inflection
    assert not same_word("login", "logs")


def test_quoted_text_and_values_are_arguments_not_request_words() -> None:
    said = request_words('log a sev2 for "disk full on build-eu-26", host web-prod-3 at a@b.io')
    assert said == ["log", "host"]  # "sev2" has a digit: a value too


def test_a_word_many_tools_share_counts_less_than_a_rare_one() -> None:
    scores = relevance("turn off login for the order", TOOLS)
    # "login" names one tool: one unit; "order" is in two tools' words.
    shared = math.log(1 + 4 / 2) / math.log(1 + 4)
    assert scores["deactivateLogin"] == pytest.approx(1.0)
    assert scores["find_order"] == pytest.approx(shared)
    assert scores["locate-shipment"] == pytest.approx(DESCRIPTION_WEIGHT * shared)
    assert scores["credentials_recover"] == 0.0


def test_a_long_tool_list_does_not_make_a_word_weigh_more() -> None:
    many = [*TOOLS, *(ToolSpec(f"tool_{i}", "Does something else") for i in range(40))]
    assert relevance("turn off login", many)["deactivateLogin"] == pytest.approx(1.0)
    assert relevance("turn off login", TOOLS[:2])["deactivateLogin"] == pytest.approx(1.0)


def test_bonuses_are_weighted_and_given_only_where_the_request_names_a_tool() -> None:
    bonuses = tool_bonuses("where is my package? tracking please", TOOLS, weight=2.0)
    assert bonuses == {
        "credentials_recover": 0.0,
        "deactivateLogin": 0.0,
        "find_order": 0.0,
        "locate-shipment": pytest.approx(2.0 * DESCRIPTION_WEIGHT),  # "tracking": one tool
    }
    assert tool_bonuses("tracking", TOOLS, weight=0.0) == {}
    assert tool_bonuses("tracking", TOOLS[3:], weight=1.0) == {}  # one tool: nothing to choose
    assert tool_bonuses("hello there", TOOLS) == {}
    for bad in (-1.0, float("nan"), True, "4"):
        with pytest.raises(ValueError, match="weight"):
            tool_bonuses("tracking", TOOLS, weight=bad)  # type: ignore[arg-type]


def test_values_are_quoted_text_and_value_like_tokens() -> None:
    assert holds_values("where is order 58213?") and holds_values("mail a@b.io")
    assert holds_values('file "disk full" now') and holds_values("restart web-prod-03.")
    assert not holds_values("thanks, bye!") and not holds_values("can you order me a pizza")


def _enum_tool(name: str, **enums: list[str]) -> ToolSpec:
    properties = {k: {"type": "string", "enum": v} for k, v in enums.items()}
    return ToolSpec(name, "", {"type": "object", "properties": properties})


ASSIGN = _enum_tool("assign_permission", group=["admin", "viewer", "operator"])
OUTAGE = _enum_tool("raise_outage", severity=["sev1", "sev2", "sev3"])
TICKET = ToolSpec(
    "new_ticket",
    "",
    {"properties": {"level": {"anyOf": [{"enum": ["low", "urgent"]}, {"type": "null"}]}}},
)


def test_a_value_only_one_tool_takes_names_that_tool() -> None:
    tools = [ASSIGN, OUTAGE, TICKET]
    scores = relevance("mhaas needs viewer rights", tools)
    assert scores == {"assign_permission": MEMBER_WEIGHT, "raise_outage": 0.0, "new_ticket": 0.0}
    # value-like members count too; nested enums are read, stop words are not
    assert relevance("log a sev2 for the disk", tools)["raise_outage"] == MEMBER_WEIGHT
    assert enum_members(TICKET.parameters) == {"low"}
    assert relevance("it's kind of urgent", tools)["new_ticket"] == 0.0


@pytest.mark.parametrize(
    "request_text",
    [
        'new ticket "viewer page down"',  # quoted: an argument
        "reboot web-viewer-2",  # part of a host name
        "the viewers are down",  # another word
    ],
)
def test_a_member_counts_only_as_a_word_of_its_own(request_text: str) -> None:
    assert relevance(request_text, [ASSIGN, OUTAGE])["assign_permission"] == 0.0
