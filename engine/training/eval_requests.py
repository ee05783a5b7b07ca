"""How ``agentflow eval`` decodes one batch of cases: whole, one request at a time, with follow-ups.

The evaluation decodes as ``EmbeddedModel`` does (``agentflow.models._step_decoding``),
on its own decoder function: a message holding several requests is decoded one
request at a time where asked (:mod:`..request_parts`), the parts in the same
batch as the other cases, and decoded whole where the parts' calls do not join;
then the actions whose calls leave part of the request untouched get their
follow-up calls (:mod:`..call_coverage`). Every extra decode's passes and tokens
count in its case's row: its cost, kept or not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..call_coverage import follow_up
from ..chat_template import last_request, with_request
from ..request_parts import SplitRequest, split_request
from .corpus import Sample

if TYPE_CHECKING:
    from ..generation import GenerationConfig

logger = logging.getLogger(__name__)

#: Decodes a batch: prompts, constraint sessions, config, choice priors -> texts,
#: per-row stats, seconds, and per row the mode that served it (``auto``; else None).
Decoder = Callable[
    [list[str], list[Any], "GenerationConfig", list["str | None"]],
    tuple[list[str], list[Any], float, list["str | None"]],
]
#: ``new_session(row, request)``: the constraint session of a batch's ``row``, with
#: ``request`` (a part of the case's request) in place of its request, or the case's
#: own with None.
SessionMaker = Callable[[int, "str | None"], Any]


def decode_batch(
    decode: Decoder,
    cases: Sequence[Sample],
    schemas: Sequence[dict[str, Any]],
    priors: Sequence[str | None],
    new_session: SessionMaker | None,
    config: GenerationConfig,
    *,
    split_requests: bool = False,
    follow_up_calls: bool = False,
) -> tuple[list[str], list[Any], float, list[str | None]]:
    """Decode ``cases`` (one action each) as the module docstring says; the texts,
    the rows' stats, the seconds and the mode that served each row. Without
    ``new_session`` (an unconstrained run) the cases are decoded whole and once."""
    constrained = new_session is not None
    splits = [
        _split(case, schema) if split_requests and constrained else None
        for case, schema in zip(cases, schemas, strict=True)
    ]
    rows_of: list[tuple[int, str | None]] = [
        (row, part)
        for row, split in enumerate(splits)
        for part in (split.parts if split else (None,))
    ]
    texts_all, stats_all, seconds, served_all = decode(
        [_with_request(cases[row], part).prompt() for row, part in rows_of],
        [new_session(row, part) for row, part in rows_of] if new_session else [],
        config,
        [priors[row] for row, _ in rows_of],
    )
    texts: list[str] = [""] * len(cases)
    stats: list[Any] = [None] * len(cases)
    served: list[str | None] = [None] * len(cases)
    whole_again: list[int] = []
    for row, split in enumerate(splits):
        mine = [k for k, (r, _) in enumerate(rows_of) if r == row]
        stats[row] = _summed([stats_all[k] for k in mine], shared_passes=True)
        served[row] = served_all[mine[0]]
        joined = _joined(split, [texts_all[k] for k in mine], schemas[row])
        if split is not None and joined is None:
            whole_again.append(row)
        texts[row] = joined if joined is not None else texts_all[mine[0]]
    if whole_again:
        again, again_stats, more_seconds, again_served = decode(
            [cases[row].prompt() for row in whole_again],
            [new_session(row, None) for row in whole_again] if new_session else [],
            config,
            [priors[row] for row in whole_again],
        )
        seconds += more_seconds
        for row, text, row_stats, by in zip(
            whole_again, again, again_stats, again_served, strict=True
        ):
            texts[row], served[row] = text, by
            stats[row] = _summed([stats[row], row_stats])
    if follow_up_calls and new_session is not None:
        joined_rows = {row for row, split in enumerate(splits) if split} - set(whole_again)
        seconds += _follow_up(
            decode, texts, stats, cases, schemas, priors, new_session, config, joined_rows
        )
    return texts, stats, seconds, served


def _split(case: Sample, schema: dict[str, Any]) -> SplitRequest | None:
    if not case.messages or case.messages[-1].role != "user":
        return None
    return split_request(last_request(case.messages), schema)


def _joined(split: SplitRequest | None, texts: list[str], schema: dict[str, Any]) -> str | None:
    return split.joined(texts, schema) if split is not None else None


def _with_request(case: Sample, request: str | None) -> Sample:
    """``case`` with ``request`` in place of its request (itself for None)."""
    if request is None:
        return case
    messages = with_request(case.messages, request)
    if messages is None:  # split and follow-up parts exist only where the request is last
        raise ValueError("the case's conversation does not end with its request")
    return replace(case, messages=tuple(messages))


def _summed(rows: Sequence[Any], *, shared_passes: bool = False) -> Any:
    """One row's stats with the tokens and passes of ``rows`` added up; with
    ``shared_passes`` (rows of one engine call) the passes are the most any row took."""
    first = rows[0]
    if len(rows) == 1 or not hasattr(first, "nfe"):
        return first
    passes = [r.nfe for r in rows]
    return replace(
        first,
        tokens=sum(r.tokens for r in rows),
        nfe=max(passes) if shared_passes else sum(passes),
        forced_tokens=sum(r.forced_tokens for r in rows),
    )


def _follow_up(
    decode: Decoder,
    texts: list[str],
    stats: list[Any],
    cases: Sequence[Sample],
    schemas: Sequence[dict[str, Any]],
    priors: Sequence[str | None],
    new_session: SessionMaker,
    config: GenerationConfig,
    skip: set[int],
) -> float:
    """Decode the follow-up calls the actions ``texts`` of ``cases`` owe (rows in
    ``skip`` aside), each for the part of its request left untouched as a request
    of its own, and put the merged actions that use a value left in ``texts`` (the
    passes and tokens of every follow-up added to ``stats``); the seconds it took."""
    owed = []
    for row, (text, case) in enumerate(zip(texts, cases, strict=True)):
        if row in skip or case.messages[-1].role != "user":
            continue
        follow = follow_up(text, last_request(case.messages))
        if follow is not None:
            owed.append((row, follow))
    if not owed:
        return 0.0
    more, more_stats, seconds, _ = decode(
        [_with_request(cases[row], follow.untouched).prompt() for row, follow in owed],
        [new_session(row, follow.untouched) for row, follow in owed],
        config,
        [priors[row] for row, _ in owed],
    )
    for (row, follow), text, extra in zip(owed, more, more_stats, strict=True):
        stats[row] = _summed([stats[row], extra])
        merged = follow.merged(text, schemas[row])
        if merged is None:
            logger.debug("follow-up of row %d for %r dropped: %s", row, follow.untouched, text)
            continue
        texts[row] = merged
    return seconds
