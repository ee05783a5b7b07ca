"""The rule of the second decode: which rows are close, and how sure a decode is after its choice."""

from __future__ import annotations

import math

import pytest

from agentflow.engine.generation import (
    GenerationConfig,
    GenerationResult,
    GenerationStats,
    MadeChoice,
    RowStats,
)
from agentflow.engine.second_choice import close_rows, decode_second, sureness


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


class _Session:
    """A constraint that restarts, and records the value it is told to pick first."""

    def __init__(self) -> None:
        self.picked: str | None = None

    def restarted(self) -> _Session:
        return _Session()

    def pick_first(self, value: str) -> None:
        self.picked = value


class _Engine:
    """Answers the second decode with the rows it is given."""

    def __init__(self, rows: list[RowStats], sequences: list[list[int]]) -> None:
        self.rows, self.sequences = rows, sequences
        self.asked: list[dict[str, object]] = []

    def generate(self, prompts: list[list[int]], config: GenerationConfig, **kw: object):
        self.asked.append({"prompts": prompts, **kw})
        return GenerationResult(self.sequences, GenerationStats("diffusion", nfe=4, rows=self.rows))


def _decoded(row: RowStats, seq: list[int]) -> GenerationResult:
    return GenerationResult([seq], GenerationStats("diffusion", nfe=row.nfe, rows=[row]))


CLOSE = MadeChoice(0, 1, ("a", "b"), (-1.0, -2.0), chosen=0)
PICKED = MadeChoice(0, 1, ("b",), (0.0,), chosen=0)


def test_a_stopped_row_takes_a_runner_up_decode_that_finishes() -> None:
    config = GenerationConfig(score_choices=True, second_choice=3.0)
    first = RowStats(nfe=3, first_choice=CLOSE, confidences=[0.9], low_confidence=0.1)
    result = _decoded(first, [5])
    finished = RowStats(nfe=4, tokens=2, first_choice=PICKED, confidences=[1.0, 0.2])
    engine = _Engine([finished], [[7, 8]])
    decode_second(engine, [[1, 2]], config, [_Session()], None, result, min_confidence=0.5)  # type: ignore[arg-type]
    assert engine.asked[0]["min_confidence"] == 0.5
    assert result.sequences == [[7, 8]]
    row = result.stats.rows[0]
    assert row.low_confidence is None and row.nfe == 7 and row.tokens == 2
    assert row.second_choice is not None and row.second_choice.kept
    assert (row.second_choice.first, row.second_choice.runner_up) == ("a", "b")
    # A runner-up decode that stops too is not kept: the row stays stopped.
    first = RowStats(nfe=3, first_choice=CLOSE, confidences=[0.9], low_confidence=0.1)
    result = _decoded(first, [5])
    stopped = RowStats(nfe=4, first_choice=PICKED, confidences=[1.0], low_confidence=0.2)
    decode_second(_Engine([stopped], [[7]]), [[1, 2]], config, [_Session()], None, result, 0.5)  # type: ignore[arg-type]
    assert result.sequences == [[5]] and result.stats.rows[0].low_confidence == 0.1
    assert result.stats.rows[0].second_choice is not None
    assert not result.stats.rows[0].second_choice.kept
