from __future__ import annotations

import pytest

from agentflow.engine.training.evaluate import eval_cases
from agentflow.engine.training.long_prompts import lengthened


def test_cases_get_finished_exchanges_in_front_until_long_enough() -> None:
    cases = eval_cases(12, 5)
    longer = lengthened(cases, 3000, len, seed=5)  # characters stand in for tokens
    assert len(longer) == len(cases)
    for short, long in zip(cases, longer, strict=True):
        assert len(long.prompt()) >= 3000
        # The case itself is unchanged: its tools, its turns at the end, what it expects.
        assert (long.tools, long.target, long.calls, long.kind) == (
            short.tools,
            short.target,
            short.calls,
            short.kind,
        )
        added = long.messages[: len(long.messages) - len(short.messages)]
        assert long.messages[len(added) :] == short.messages
        # What is in front is whole exchanges: each ends with an answer after a result.
        assert added and added[-1].role == "assistant" and '"final"' in added[-1].content
        assert [m.role for m in added].count("tool") >= 1
    assert lengthened(cases, 3000, len, seed=5) == longer  # reproducible
    assert lengthened(cases, 0, len, seed=5) == cases


def test_a_length_no_exchanges_can_reach_is_refused() -> None:
    with pytest.raises(ValueError, match="did not make a prompt"):
        lengthened(eval_cases(1, 5), 10**7, len, seed=5)
