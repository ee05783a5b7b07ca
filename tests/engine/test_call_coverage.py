"""Which parts of a request an action's calls serve, and the follow-up call owed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from agentflow.engine.call_coverage import (
    NEXT_CALL,
    FollowUp,
    clause_values,
    clauses,
    follow_up,
    follow_up_rows,
    untouched,
)
from agentflow.engine.errors import InfeasibleConstraintError
from agentflow.engine.tokenizer import Tokenizer

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


def test_a_follow_up_goes_on_from_the_last_call() -> None:
    first = action(("bill_show", {"id": "INV-2023-1670"}))
    follow = follow_up(first, TWO_ASKS)
    assert follow is not None
    assert follow.prefix == first[: -len("]}")] + NEXT_CALL
    assert follow.untouched == "downgrade cus_457 to enterprise, thanks"


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


def test_a_follow_up_is_kept_only_when_its_call_uses_a_value_left() -> None:
    follow = follow_up(action(("bill_show", {"id": "INV-2023-1670"})), TWO_ASKS)
    assert follow is not None
    right = follow.prefix + 'switch_tier","arguments":{"client_id":"cus_457"}}]}'
    again = follow.prefix + 'bill_show","arguments":{"id":"INV-2023-1670"}}]}'
    assert follow.serves(right)
    assert not follow.serves(again)
    assert not follow.serves(right.replace("INV-2023-1670", "INV-1"))  # prefix changed
    assert not follow.serves(follow.prefix + "broken")


class RecordingSession:
    """A stand-in constraint session that records what it is advanced over."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.advanced: list[int] = []

    def advance(self, token_ids: Sequence[int]) -> None:
        if self.refuse:
            raise InfeasibleConstraintError("refused")
        self.advanced.extend(token_ids)


def test_follow_up_rows_continue_the_prompt_and_prior_with_the_prefix(
    tokenizer: Tokenizer,
) -> None:
    texts = [action(("bill_show", {"id": "INV-2023-1670"})), '{"final":"hi"}']
    made: list[tuple[int, FollowUp]] = []

    def new_session(row: int, follow: FollowUp) -> Any:
        made.append((row, follow))
        return RecordingSession()

    rows = follow_up_rows(
        texts, [TWO_ASKS, "hi"], ["P1", "P2"], ["prior", None], tokenizer, new_session, 256
    )
    assert [r.row for r in rows] == [0]
    (row,) = rows
    prefix = tokenizer.encode(row.follow.prefix)
    assert row.prompt == tokenizer.encode("P1") + prefix
    assert row.prior == tokenizer.encode("prior") + prefix
    assert row.session.advanced == prefix  # type: ignore[attr-defined]
    assert row.prefix_tokens == len(prefix)
    assert made == [(0, row.follow)]
    assert row.action('switch_tier","arguments":{"client_id":"cus_457"}}]}') is not None
    assert row.action('bill_show","arguments":{"id":"INV-2023-1670"}}]}') is None


def test_rows_the_constraint_refuses_or_the_budget_cannot_hold_are_left(
    tokenizer: Tokenizer,
) -> None:
    texts = [action(("bill_show", {"id": "INV-2023-1670"}))]
    args = (texts, [TWO_ASKS], ["P"], [None], tokenizer)
    assert follow_up_rows(*args, lambda r, f: RecordingSession(refuse=True), 256) == []
    prefix = len(tokenizer.encode(texts[0]))
    assert follow_up_rows(*args, lambda r, f: RecordingSession(), prefix) == []
