"""How ``agentflow eval`` decodes one batch of cases: whole, one request at a time, with follow-ups.

The evaluation decodes as ``EmbeddedModel`` does, through the same flow
(:mod:`..request_flow`) on its own decoder function: a message holding several
requests is decoded one request at a time where asked, the parts in the same
batch as the other cases, and decoded whole where the parts' calls do not join;
then the actions whose calls leave part of the request untouched get their
follow-up calls. Every extra decode's passes and tokens count in its case's
row: its cost, kept or not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..chat_template import last_request, with_request
from ..request_flow import FlowStep, Row, decode_steps
from .corpus import Sample

if TYPE_CHECKING:
    from ..generation import GenerationConfig

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
    steps = [
        FlowStep(
            last_request(case.messages) if constrained and _follows_request(case) else None,
            schema,
            split=split_requests,
            follow_up=follow_up_calls,
        )
        for case, schema in zip(cases, schemas, strict=True)
    ]
    seconds = 0.0

    def decode_rows(rows: list[Row]) -> list[tuple[str, tuple[Any, str | None]]]:
        nonlocal seconds
        texts, stats, took, served = decode(
            [_with_request(cases[r.step], r.part).prompt() for r in rows],
            [new_session(r.step, r.part) for r in rows] if new_session else [],
            config,
            [priors[r.step] for r in rows],
        )
        seconds += took
        return list(zip(texts, zip(stats, served, strict=True), strict=True))

    texts: list[str] = []
    stats: list[Any] = []
    served: list[str | None] = []
    for step in decode_steps(steps, decode_rows):
        if step.follow_up_error is not None:  # a broken decoder fails the evaluation
            raise step.follow_up_error
        first = _summed([row for row, _ in step.first], shared_passes=True)
        by = step.whole[1] if step.whole is not None else step.first[0][1]
        texts.append(step.text)
        stats.append(_summed([first, *(row for row, _ in step.more)]))
        served.append(by)
    return texts, stats, seconds, served


def _follows_request(case: Sample) -> bool:
    return bool(case.messages) and case.messages[-1].role == "user"


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
