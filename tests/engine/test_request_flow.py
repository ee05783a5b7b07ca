"""The request flow both decoding paths share: parts, wholes again, follow-ups."""

from __future__ import annotations

import json

import pytest

from agentflow.engine.request_flow import FlowStep, Row, decode_steps

SCHEMA = {"type": "object"}
TWO = "Status of 2537? plus can you void ORD-91016?"


def action(*calls: tuple[str, str]) -> str:
    body = [{"name": name, "arguments": {"id": order}} for name, order in calls]
    return json.dumps({"tool_calls": body}, separators=(",", ":"))


class Script:
    """Answers each row by its part (or the step's own request); records each call's rows."""

    def __init__(self, answers: dict[str | None, str], fail_on: int | None = None) -> None:
        self.answers = answers
        self.fail_on = fail_on
        self.calls: list[list[Row]] = []

    def __call__(self, rows: list[Row]) -> list[tuple[str, int]]:
        self.calls.append(rows)
        if len(self.calls) == self.fail_on:
            raise RuntimeError("engine down")
        return [(self.answers[r.part], len(self.calls)) for r in rows]


def test_parts_that_join_serve_the_step_and_owe_no_follow_up() -> None:
    script = Script(
        {
            "Status of 2537?": action(("get", "2537")),
            "plus can you void ORD-91016?": action(("void", "ORD-91016")),
        }
    )
    shown: list[tuple[int, str]] = []
    (step,) = decode_steps(
        [FlowStep(TWO, SCHEMA, split=True, follow_up=True)],
        script,
        on_text=lambda i, t: shown.append((i, t)),
    )
    both = action(("get", "2537"), ("void", "ORD-91016"))
    assert len(script.calls) == 1 and [r.part for r in script.calls[0]] == [
        "Status of 2537?",
        "plus can you void ORD-91016?",
    ]
    assert (step.text, step.joined, step.first, step.more) == (both, True, [1, 1], [])
    assert shown == [(0, both)]


def test_a_follow_up_that_fails_leaves_the_action_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = Script({None: action(("get", "2537"))}, fail_on=2)
    (step,) = decode_steps([FlowStep(TWO, SCHEMA, follow_up=True)], script)
    assert step.text == action(("get", "2537"))
    assert step.follow_up == "plus can you void ORD-91016?"
    assert isinstance(step.follow_up_error, RuntimeError) and step.more == []
    assert "follow-up calls failed" in caplog.text


def test_a_step_after_tool_results_is_decoded_whole_and_once() -> None:
    script = Script({None: action(("get", "2537"))})
    (step,) = decode_steps([FlowStep(None, SCHEMA, split=True, follow_up=True)], script)
    assert script.calls == [[Row(0)]]
    assert (step.text, step.parts, step.follow_up) == (action(("get", "2537")), None, None)
