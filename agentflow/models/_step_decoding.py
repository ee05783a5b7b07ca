"""Decoding a batch of step jobs with an engine; the calls their actions owe, and those to drop.

Runs in ``EmbeddedModel``'s worker thread. :func:`decode_jobs` makes one engine
call for a batch of jobs and turns each row into a :class:`StepOutcome` (text and
usage). :func:`request_rows` gives a job whose message holds several requests
one row per request (:mod:`agentflow.engine.request_parts`), and
:func:`decode_planned` decodes the batch's rows in one call and joins each such
job's calls, decoding the message whole where they do not join.
:func:`decode_follow_ups` then finds the actions whose calls leave a part
of the request with values untouched (:mod:`agentflow.engine.call_coverage`),
decodes that part as a request of its own in a second engine call, and merges the
new calls into each action where they use a value left. :func:`mend_actions` last
runs the text checks on each action (:mod:`agentflow.engine.action_mending`):
redundant calls, near copies, made-up options. They run after the follow-up:
before, a restored value of a wrong call would pass for a clause served and
hold back the follow-up that replaces it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._step_jobs import StepJob, StepOutcome, part_job
from .base import StepUsage

#: How a step's usage reason names its follow-up call (then the part it was for).
FOLLOW_UP = "a follow-up call for:"
#: Why a follow-up's calls were not kept.
DROPPED = "no new call used one of its values"
#: How a step's usage reason says its message was decoded one request at a time.
SPLIT = "decoded one request at a time:"
#: ... and that the parts' calls did not join, so the message was decoded whole.
NOT_JOINED = "not joined, decoded whole"
#: How a step's usage reason says a close first tool choice was decoded again with the
#: runner-up (``GenerationConfig.second_choice``), then whether that decode was kept.
SECOND_CHOICE = "decoded again with the runner-up"

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from agentflow.engine.call_coverage import FollowUp
    from agentflow.engine.generation import GenerationConfig
    from agentflow.engine.hybrid_stats import ServedMode
    from agentflow.engine.request_parts import SplitRequest

#: A job, the parts of its message (None: decoded whole) and the jobs that decode it.
Planned = tuple[StepJob, "SplitRequest | None", list[StepJob]]


def decode_jobs(
    engine: Any,
    tokenizer: Any,
    jobs: Sequence[StepJob],
    sessions: Sequence[Any],
    config: GenerationConfig,
    mode: str,
    model_name: str,
) -> dict[int, StepOutcome]:
    """Decode ``jobs`` (one mode, one config) in one ``engine.generate`` call; the
    outcomes by ``id(job)``."""
    pieces: list[list[int]] = [[] for _ in jobs]

    def on_block(row: int, ids: list[int]) -> None:
        job = jobs[row]
        if job.on_text is not None:
            pieces[row].extend(ids)
            job.on_text(tokenizer.decode(pieces[row]))

    kwargs: dict[str, Any] = {
        "constraints": list(sessions),
        "on_block": on_block,
        "choice_priors": [j.prior for j in jobs],
    }
    if mode in ("hybrid", "auto"):
        kwargs.update(mode=mode, reason=jobs[0].reason)
    result = engine.generate([j.prompt for j in jobs], config, **kwargs)
    served = getattr(result.stats, "served", None)
    texts = result.texts or [tokenizer.decode(s) for s in result.sequences]
    out: dict[int, StepOutcome] = {}
    for i, (job, row) in enumerate(zip(jobs, result.stats.rows, strict=True)):
        usage = StepUsage(
            input_tokens=row.prompt_tokens,
            output_tokens=row.tokens,
            forward_passes=row.nfe,
            forced_tokens=row.forced_tokens,
            cached_input_tokens=row.cached_tokens,
            mode=served[i].mode if served else result.stats.mode,
            reason=_served_reason(served[i]) if served else job.reason,
            model=model_name,
            batch_size=len(jobs),
        )
        note = row.second_choice
        if note is not None:
            kept = "kept" if note.kept else "not kept"
            usage.reason += f"; {SECOND_CHOICE} {note.runner_up} for {note.first} ({kept})"
            if note.kept and job.on_text is not None:  # the stream showed the first decode
                job.on_text(texts[i])
        out[id(job)] = StepOutcome(text=texts[i], usage=usage)
    return out


def request_rows(job: StepJob) -> tuple[SplitRequest | None, list[StepJob]]:
    """The parts of ``job``'s message and a job per part where it asks for it
    (``job.split``), decodes right after the request and the message holds several
    requests its schema has room for (:func:`~agentflow.engine.request_parts.split_request`);
    otherwise ``(None, [job])``."""
    if not job.split or not job.follows_request:
        return None, [job]
    from agentflow.engine.request_parts import split_request

    split = split_request(job.request, job.schema)
    if split is None:
        return None, [job]
    rows = [row for row in (part_job(job, part) for part in split.parts) if row is not None]
    return (split, rows) if len(rows) == len(split.parts) else (None, [job])


def decode_planned(
    engine: Any,
    tokenizer: Any,
    plan: Sequence[Planned],
    sessions: Sequence[Any],
    config: GenerationConfig,
    mode: str,
    model_name: str,
    new_session: Callable[[StepJob], Any],
) -> tuple[dict[int, StepOutcome], set[int]]:
    """Decode every row of ``plan`` (``sessions``: one per row, in order) in one
    engine call; join the parts' calls of each split job
    (:meth:`~agentflow.engine.request_parts.SplitRequest.joined`), and decode the
    jobs whose parts do not join whole in a second call. The outcomes by
    ``id(job)``, and the ids of the jobs served by their parts. A split job's usage
    counts the tokens of every row and decode it took, and the passes of its
    longest part (the parts share their passes) plus any whole decode's."""
    rows = [row for _, _, job_rows in plan for row in job_rows]
    out = decode_jobs(engine, tokenizer, rows, sessions, config, mode, model_name)
    done: dict[int, StepOutcome] = {}
    joined: set[int] = set()
    whole: list[tuple[StepJob, StepUsage, str]] = []
    for job, split, job_rows in plan:
        if split is None:
            done[id(job)] = out[id(job)]
            continue
        usage = replace(out[id(job_rows[0])].usage)
        for row in job_rows[1:]:
            usage = added(usage, out[id(row)].usage)
        # The parts are rows of the same forward passes: the step took as many
        # passes as its longest part, and the tokens of all.
        usage.forward_passes = max(out[id(row)].usage.forward_passes for row in job_rows)
        note = f"{SPLIT} {' | '.join(split.parts)}"
        text = split.joined([out[id(row)].text for row in job_rows], job.schema)
        if text is None:
            whole.append((job, usage, note))
            continue
        usage.reason += f"; {note}"
        done[id(job)] = StepOutcome(text=text, usage=usage)
        joined.add(id(job))
        if job.on_text is not None:
            job.on_text(text)
    if whole:
        again = decode_jobs(
            engine,
            tokenizer,
            [job for job, _, _ in whole],
            [new_session(job) for job, _, _ in whole],
            config,
            mode,
            model_name,
        )
        for job, parts_usage, note in whole:
            outcome = again[id(job)]
            usage = added(outcome.usage, parts_usage)
            usage.reason += f"; {note} ({NOT_JOINED})"
            done[id(job)] = StepOutcome(text=outcome.text, usage=usage)
    return done, joined


def added(first: StepUsage, extra: StepUsage) -> StepUsage:
    """``first`` with the tokens and passes of ``extra`` added (a copy)."""
    return replace(
        first,
        input_tokens=first.input_tokens + extra.input_tokens,
        output_tokens=first.output_tokens + extra.output_tokens,
        forward_passes=first.forward_passes + extra.forward_passes,
        forced_tokens=first.forced_tokens + extra.forced_tokens,
        cached_input_tokens=first.cached_input_tokens + extra.cached_input_tokens,
    )


def decode_follow_ups(
    engine: Any,
    tokenizer: Any,
    jobs: Sequence[StepJob],
    done: dict[int, StepOutcome],
    config: GenerationConfig,
    mode: str,
    model_name: str,
    new_session: Callable[[StepJob], Any],
) -> int:
    """Decode the follow-up calls that the outcomes ``done`` of ``jobs`` owe, each for
    the part of its request left untouched as a request of its own
    (:func:`part_job`), and put each merged action whose new calls use a value
    left in ``done`` (its usage counts both decodes, kept or not); how many were
    kept. ``new_session(job)``: a constraint session for a follow-up's job. Where
    the second decode fails, the first actions stand and their reason says so."""
    from agentflow.engine.call_coverage import follow_up

    owed: list[tuple[StepJob, FollowUp, StepJob]] = []
    for job in jobs:
        follow = follow_up(done[id(job)].text, job.request)
        if follow is None or not follow.fits(job.schema):
            continue
        again = part_job(job, follow.untouched)
        if again is not None:
            owed.append((job, follow, again))
    if not owed:
        return 0
    try:
        more = decode_jobs(
            engine,
            tokenizer,
            [again for _, _, again in owed],
            [new_session(again) for _, _, again in owed],
            config,
            mode,
            model_name,
        )
    except Exception as exc:  # a follow-up is an extra: its failure never costs the action
        logger.exception("follow-up calls failed; the first actions stand")
        for job, follow, _ in owed:
            outcome = done[id(job)]
            usage = replace(outcome.usage)
            usage.reason += f"; {FOLLOW_UP} {follow.untouched} (failed: {exc})"
            done[id(job)] = StepOutcome(text=outcome.text, usage=usage)
        return 0
    kept = 0
    for job, follow, again in owed:
        first, extra = done[id(job)], more[id(again)]
        usage = added(first.usage, extra.usage)  # the follow-up's cost, kept or not
        merged = follow.merged(extra.text, job.schema)
        if merged is None:
            usage.reason += f"; {FOLLOW_UP} {follow.untouched} (dropped: {DROPPED})"
            done[id(job)] = StepOutcome(text=first.text, usage=usage)
            continue
        usage.reason += f"; {FOLLOW_UP} {follow.untouched}"
        done[id(job)] = StepOutcome(text=merged, usage=usage)
        if job.on_text is not None:  # the stream shows the merged action last
            job.on_text(merged)
        kept += 1
    return kept


def mend_actions(jobs: Sequence[StepJob], done: dict[int, StepOutcome]) -> int:
    """Run the checks each job asks for on its outcome in ``done``
    (:func:`agentflow.engine.action_mending.mend_action`: redundant calls, near
    copies, made-up options, in that order); a changed action gets the checks'
    notes in its usage reason and is streamed. How many actions changed."""
    from agentflow.engine.action_mending import mend_action

    changed = 0
    for job in jobs:
        outcome = done[id(job)]
        if job.step is None:
            continue
        text, notes = mend_action(
            outcome.text,
            job.step.messages,
            job.tools,
            job.step.instructions,
            job.schema,
            drop_redundant_calls=job.drop_redundant,
            restore_copies=job.restore_copies,
            drop_made_up_options=job.drop_options,
        )
        if not notes:
            continue
        usage = replace(outcome.usage)
        usage.reason += "".join(f"; {note}" for note in notes)
        done[id(job)] = StepOutcome(text=text, usage=usage)
        if job.on_text is not None:
            job.on_text(text)
        changed += 1
    return changed


def _served_reason(served: ServedMode) -> str:
    """Why the step was served in its mode; an ``auto`` fallback that kept the
    diffusion draft's confident blocks says how many tokens they held."""
    if served.diffusion_tokens:
        return f"{served.reason}; kept {served.diffusion_tokens} diffusion tokens"
    return served.reason
