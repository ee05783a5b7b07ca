"""Decoding the text answer out of partial action drafts (what the server streams)."""

from __future__ import annotations

import json

import pytest

from agentflow.server.streaming import ChunkWriter, text_prefix


@pytest.mark.parametrize(
    ("draft", "expected"),
    [
        ('{"final":"Hel', "Hel"),
        ('{"final":"Hello"}', "Hello"),
        ('{"final":"a\\nb', "a\nb"),
        ('{"final":"quote \\"x\\" end"}', 'quote "x" end'),
        ('{"final":"cut \\', "cut "),  # escape not complete yet
        ('{"final":"cut \\u00e', "cut "),  # \\u escape not complete yet
        ('{"final":"caf\\u00e9', "café"),
        ('{"final":"smile \\ud83d', "smile "),  # high surrogate waits for its low half
        ('{"final":"smile \\ud83d\\ude00', "smile 😀"),
        ('{"final":"ab<|mask|><|mask|>', "ab"),
        ('{"final":"9999\ufffd', "9999"),  # a block ended inside a multi-byte character
        ('{"tool_calls":[', None),
        ('{"final":{"a":1', None),
    ],
)
def test_text_prefix(draft: str, expected: str | None) -> None:
    assert text_prefix(draft) == expected


def test_drafts_become_increasing_deltas_and_the_rest_is_sent_at_the_end() -> None:
    writer = ChunkWriter("chatcmpl-1", 0, "tiny")
    events = [writer.draft(d) for d in ['{"final":"Or', '{"final":"Or', '{"final":"Order 5']]
    assert events[1] is None
    deltas = [
        json.loads(e.removeprefix("data: "))["choices"][0]["delta"]["content"] for e in events if e
    ]
    assert deltas == ["Or", "der 5"]
    tail = writer.finish_text("Order 58213 shipped.")
    contents = [json.loads(e.removeprefix("data: "))["choices"][0] for e in tail]
    assert contents[0]["delta"]["content"] == "8213 shipped."
    assert contents[-1]["finish_reason"] == "stop"
