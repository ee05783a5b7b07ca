"""The rule of the second decode: which rows are close, and how sure a decode is after its choice."""

from __future__ import annotations

import math

import pytest

from agentflow.engine.generation import MadeChoice, RowStats
from agentflow.engine.second_choice import close_rows, sureness


def _row(made: MadeChoice | None, confidences: list[float | None]) -> RowStats:
    return RowStats(first_choice=made, confidences=confidences)


def test_the_runner_up_is_the_best_candidate_after_the_chosen_one() -> None:
    made = MadeChoice(2, 1, ("a", "b", "c"), (-1.0, -4.0, -2.5), chosen=0)
    assert made.runner_up == ("c", pytest.approx(1.5))
    assert MadeChoice(0, 1, ("a",), (0.0,), chosen=0).runner_up is None


def test_rows_are_close_where_the_runner_up_scored_within_the_margin() -> None:
    near = MadeChoice(0, 1, ("a", "b"), (-1.0, -2.0), chosen=0)
    far = MadeChoice(0, 1, ("a", "b"), (-1.0, -9.0), chosen=0)
    single = MadeChoice(0, 1, ("a",), (0.0,), chosen=0)
    rows = [_row(near, []), _row(far, []), _row(single, []), _row(None, [])]
    assert close_rows(rows, 3.0) == [(0, "b", pytest.approx(1.0))]
    assert [r for r, _, _ in close_rows(rows, 10.0)] == [0, 1]
    assert close_rows(rows, 1.0) == []  # strictly under the margin


def test_sureness_reads_the_models_tokens_after_the_choice_only() -> None:
    made = MadeChoice(offset=1, length=2, candidates=("a", "b"), scores=(0.0, -1.0), chosen=0)
    # Before and inside the choice: not read; forced tokens (None): not read.
    row = _row(made, [0.01, 0.3, 0.3, None, 0.5, None, 0.25])
    assert sureness(row) == pytest.approx((math.log(0.5) + math.log(0.25)) / 2)
    assert sureness(_row(made, [0.9, 0.9, 0.9, None])) is None
    assert sureness(_row(None, [0.5])) is None
    # A zero confidence is floored: the mean stays finite.
    assert math.isfinite(sureness(_row(made, [1.0, 1.0, 1.0, 0.0])))  # type: ignore[arg-type]
