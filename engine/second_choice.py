"""A second decode where a row's first choice was close (``GenerationConfig.second_choice``).

The drafter takes a tool name whole (:mod:`.choice_scoring`), with the request's
bonuses added (relevance, similarity, argument fit). Where two tools read about
equally well — the request's values would fill either — the margin between the
best and the runner-up is small, and the first guess is often the wrong one.
What tells them apart comes after the name: a model filling the arguments of the
tool the request is about commits them surely; one filling a wrong tool's
arguments (a hostname in a ``town`` slot, a date slot with nothing to hold)
hesitates.

So where a row's first closed value choice (the first call's tool name, in an
action) was won by less than ``second_choice`` (log-space), the row is decoded
again with the runner-up taken (:meth:`~.constraints.ConstraintSession.pick_first`
on a restarted session), and the decode whose tokens after the choice the model
committed more surely — their mean log-confidence, forced tokens aside — is the
row's output. The row's stats count both decodes' passes and say which served
(``RowStats.second_choice``). Rows decode again in one batch, in the same
``generate`` call; only greedy diffusion under ``score_choices``, with
constraints that can restart. With ``min_confidence`` (``auto`` mode), a row
that stopped on a doubtful token after a close choice tries the runner-up too
(hesitation is what a wrong tool looks like): where that decode finishes, it is
the row's output; a second decode that stops is never kept.
A second decode that fails (an infeasible block) leaves the first decodes as
they are.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .errors import InfeasibleConstraintError
from .generation import RowStats, SecondChoice

if TYPE_CHECKING:
    from .generation import GenerationConfig, GenerationResult
    from .sampler import DiffusionEngine

logger = logging.getLogger(__name__)

#: Confidences are floored here before the log (a committed token's confidence is
#: never 0 in practice; this keeps the mean finite).
FLOOR = 1e-9


def sureness(row: RowStats) -> float | None:
    """Mean log-confidence of the tokens the model committed after ``row``'s first
    choice (forced ones aside); None when it made no choice or committed none after."""
    made = row.first_choice
    if made is None:
        return None
    after = [c for c in row.confidences[made.offset + made.length :] if c is not None]
    if not after:
        return None
    return sum(math.log(max(c, FLOOR)) for c in after) / len(after)


def close_rows(rows: list[RowStats], margin: float) -> list[tuple[int, str, float]]:
    """(row, runner-up, how far behind) for each row whose first choice's runner-up
    scored within ``margin`` of the chosen candidate."""
    out = []
    for r, row in enumerate(rows):
        made = row.first_choice
        second = made.runner_up if made is not None else None
        if second is not None and second[1] < margin:
            out.append((r, *second))
    return out


def decode_second(
    engine: DiffusionEngine,
    ids: list[list[int]],
    config: GenerationConfig,
    constraints: list[Any],
    choice_priors: Any,
    result: GenerationResult,
    min_confidence: float | None = None,
) -> None:
    """Decode again, in one batch, every row of ``result`` whose first choice was
    closer than ``config.second_choice``, with its runner-up taken, and keep the surer
    decode of each (module docstring); ``result`` is updated in place."""
    assert config.second_choice is not None
    stats = result.stats
    close = [
        (r, runner, margin)
        for r, runner, margin in close_rows(stats.rows, config.second_choice)
        if hasattr(constraints[r], "restarted")
    ]
    if not close:
        return
    sessions = []
    for r, runner, _ in close:
        session = constraints[r].restarted()
        session.pick_first(runner)
        sessions.append(session)
    priors = None if choice_priors is None else [choice_priors[r] for r, _, _ in close]
    try:
        again = engine.generate(
            [ids[r] for r, _, _ in close],
            replace(config, second_choice=None),
            constraints=sessions,
            choice_priors=priors,
            min_confidence=min_confidence,
        )
    except InfeasibleConstraintError:
        logger.warning("a second decode failed; the first decodes stand", exc_info=True)
        return
    for (r, runner, margin), seq, row in zip(close, again.sequences, again.stats.rows, strict=True):
        first = stats.rows[r]
        assert first.first_choice is not None
        made = first.first_choice
        a, b = sureness(first), sureness(row)
        stopped = first.low_confidence is not None  # the first decode is no answer
        kept = row.low_confidence is None and (stopped or (b is not None and (a is None or b > a)))
        note = SecondChoice(
            first=made.candidates[made.chosen],
            runner_up=runner,
            margin=margin,
            first_sureness=a if a is not None else float("nan"),
            second_sureness=b if b is not None else float("nan"),
            kept=kept,
        )
        passes = first.nfe + row.nfe
        if kept:
            result.sequences[r] = seq
            # The row's prompt counts once; its passes are both decodes'.
            stats.rows[r] = replace(
                row, nfe=passes, cached_tokens=first.cached_tokens, second_choice=note
            )
        else:
            first.nfe, first.second_choice = passes, note
    stats.nfe += again.stats.nfe
    stats.tokens = sum(rs.tokens for rs in stats.rows)
    stats.forced_tokens = sum(rs.forced_tokens for rs in stats.rows)
    stats.seconds += again.stats.seconds
    if result.texts is not None and again.texts is not None:
        for (r, _, _), text in zip(close, again.texts, strict=True):
            note = stats.rows[r].second_choice
            if note is not None and note.kept:
                result.texts[r] = text
