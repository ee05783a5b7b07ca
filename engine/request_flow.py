"""A batch of steps decoded request by request: a message's requests one at a time, then the calls owed.

The one flow behind ``EmbeddedModel`` and ``agentflow eval``. Each step is an
action to decode right after a user's request (or not: then it is decoded whole
and once). Where a step asks for it and its message holds several requests
(:func:`~.request_parts.split_request`), each request is a row of its own in the
batch's first decode, and the parts' calls are joined
(:meth:`~.request_parts.SplitRequest.joined`); a step whose parts do not join is
decoded whole in a second decode. Then the steps that ask for follow-up calls
and were not served by their parts get them: where an action's calls leave a
clause of the request with values untouched (:func:`~.call_coverage.follow_up`),
that clause is decoded as a request of its own, and the calls it gets are merged
in when they take one of the values left (:meth:`~.call_coverage.FollowUp.merged`).

The caller decodes: :data:`Decode` takes the rows of one engine call and gives
each row's text and whatever the caller keeps of it (``R``: stats, usage). This
module decides which rows to decode and what text each step ends with, and says
what happened (:class:`DecodedStep`) so that the caller can count every decode's
cost, kept or not, and say why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .call_coverage import FollowUp, follow_up
from .request_parts import SplitRequest, split_request

logger = logging.getLogger(__name__)

#: What the caller keeps of one decoded row (its stats or usage).
R = TypeVar("R")


@dataclass(frozen=True)
class FlowStep:
    """One step of the batch: what it decodes after, and what it asks for."""

    #: The user's request the step decodes right after; None when the conversation
    #: went on after it (tool results): such a step is decoded whole, once.
    request: str | None
    #: The step's action schema: joined and merged actions must fit it.
    schema: Mapping[str, Any]
    #: Decode a message holding several requests one request at a time.
    split: bool = False
    #: Decode the calls an action owes the part of its request it left untouched.
    follow_up: bool = False


@dataclass(frozen=True)
class Row:
    """One row of an engine call: a step, with ``part`` in place of its request
    (None: the step as it is)."""

    step: int
    part: str | None = None


#: One engine call: the rows, in order -> each row's text and what the caller keeps of it.
Decode = Callable[[list[Row]], list[tuple[str, R]]]


@dataclass
class DecodedStep(Generic[R]):
    """How one step was decoded: its text, and every decode it took."""

    text: str
    #: The rows of the first decode: one per part where the message was split (they
    #: share that call's forward passes), else the step itself.
    first: list[R]
    #: The parts the message was split into; None when it was decoded whole.
    parts: tuple[str, ...] | None = None
    #: With ``parts``: whether their calls joined (else the message was decoded whole
    #: again, :attr:`whole`).
    joined: bool = False
    #: The whole message's decode after parts that did not join.
    whole: R | None = None
    #: The part of the request a follow-up call was decoded for, and that decode.
    follow_up: str | None = None
    follow_up_row: R | None = None
    #: Whether the follow-up's calls were merged into :attr:`text`.
    follow_up_kept: bool = False
    #: Why the follow-up decode failed (the action stands as it was).
    follow_up_error: Exception | None = None

    @property
    def more(self) -> list[R]:
        """Every decode after the first, in order (for the caller's cost count)."""
        return [row for row in (self.whole, self.follow_up_row) if row is not None]


def decode_steps(
    steps: Sequence[FlowStep],
    decode: Decode[R],
    *,
    on_text: Callable[[int, str], None] | None = None,
) -> list[DecodedStep[R]]:
    """Decode ``steps`` as the module docstring says, in at most three calls of
    ``decode`` (parts and steps; the wholes of parts that did not join; the
    follow-ups). ``on_text(step, text)`` is told each text a join or a merge
    gives a step. A failing follow-up decode leaves the actions as they were and
    is recorded in :attr:`DecodedStep.follow_up_error`; the other decodes' errors
    propagate."""
    splits = [_split(step) for step in steps]
    rows = [
        Row(i, part)
        for i, split in enumerate(splits)
        for part in (split.parts if split else (None,))
    ]
    decoded = decode(rows)
    out: list[DecodedStep[R]] = []
    again: list[int] = []
    for i, split in enumerate(splits):
        mine = [d for row, d in zip(rows, decoded, strict=True) if row.step == i]
        texts = [text for text, _ in mine]
        result = DecodedStep(texts[0], [kept for _, kept in mine])
        if split is not None:
            result.parts = split.parts
            joined = split.joined(texts, steps[i].schema)
            if joined is None:
                again.append(i)
            else:
                result.text, result.joined = joined, True
                if on_text is not None:
                    on_text(i, joined)
        out.append(result)
    if again:
        for i, (text, kept) in zip(again, decode([Row(i) for i in again]), strict=True):
            out[i].text, out[i].whole = text, kept
    _follow_ups(steps, decode, out, on_text)
    return out


def _split(step: FlowStep) -> SplitRequest | None:
    if not step.split or step.request is None:
        return None
    return split_request(step.request, step.schema)


def _follow_ups(
    steps: Sequence[FlowStep],
    decode: Decode[R],
    out: list[DecodedStep[R]],
    on_text: Callable[[int, str], None] | None,
) -> None:
    """Decode the follow-up calls owed (steps served by their parts aside) and merge
    the ones that take a value left."""
    owed: list[tuple[int, FollowUp]] = []
    for i, (step, result) in enumerate(zip(steps, out, strict=True)):
        if not step.follow_up or step.request is None or result.joined:
            continue
        follow = follow_up(result.text, step.request)
        if follow is not None and follow.fits(step.schema):
            owed.append((i, follow))
    if not owed:
        return
    try:
        more = decode([Row(i, follow.untouched) for i, follow in owed])
    except Exception as exc:  # a follow-up is an extra: its failure never costs the action
        logger.exception("follow-up calls failed; the first actions stand")
        for i, follow in owed:
            out[i].follow_up, out[i].follow_up_error = follow.untouched, exc
        return
    for (i, follow), (text, kept) in zip(owed, more, strict=True):
        result = out[i]
        result.follow_up, result.follow_up_row = follow.untouched, kept
        merged = follow.merged(text, steps[i].schema)
        if merged is None:
            logger.debug("follow-up of step %d for %r dropped: %s", i, follow.untouched, text)
            continue
        result.text, result.follow_up_kept = merged, True
        if on_text is not None:
            on_text(i, merged)
