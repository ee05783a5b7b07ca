"""Decoding a batch of step jobs with an engine; the calls their actions owe, and those to drop.

Runs in ``EmbeddedModel``'s worker thread. :func:`decode_jobs` makes one engine
call for a batch of jobs and turns each row into a :class:`StepOutcome` (text and
usage). :func:`decode_requests` runs the batch through the flow that
``agentflow eval`` shares (:mod:`agentflow.engine.request_flow`): a message
holding several requests decoded one request at a time and the calls joined
(the message decoded whole where they do not join), then the follow-up call an
action owes the part of its request it left untouched; it turns what happened
into each job's usage and reason. :func:`mend_actions` last
runs the text checks on each action (:mod:`agentflow.engine.action_mending`):
redundant calls, near copies, made-up options. They run after the follow-up:
before, a restored value of a wrong call would pass for a clause served and
hold back the follow-up that replaces it.
"""

from __future__ import annotations

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

if TYPE_CHECKING:
    from agentflow.engine.generation import GenerationConfig
    from agentflow.engine.hybrid_stats import ServedMode


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


def decode_requests(
    engine: Any,
    tokenizer: Any,
    jobs: Sequence[StepJob],
    sessions: Sequence[Any],
    config: GenerationConfig,
    mode: str,
    model_name: str,
    new_session: Callable[[StepJob], Any],
) -> dict[int, StepOutcome]:
    """Decode ``jobs`` request by request (:func:`agentflow.engine.request_flow.decode_steps`):
    the requests of a message one at a time where a job asks for it, the message
    whole where their calls do not join, then the follow-up calls owed. The
    outcomes by ``id(job)``. ``sessions`` holds each job's own constraint session,
    in order; ``new_session(job)`` makes the others (parts, wholes decoded again,
    follow-ups). Each usage counts every decode its job took, kept or not (a split
    job's parts share their forward passes), and its reason says what happened."""
    from agentflow.engine.request_flow import FlowStep, Row, decode_steps

    steps = [
        FlowStep(
            job.request if job.follows_request else None,
            job.schema,
            split=job.split,
            follow_up=job.follow_up,
        )
        for job in jobs
    ]
    own = dict(enumerate(sessions))

    def decode_rows(rows: list[Row]) -> list[tuple[str, StepOutcome]]:
        row_jobs = [_row_job(jobs[r.step], r.part) for r in rows]
        row_sessions = [
            own.pop(r.step) if r.part is None and r.step in own else new_session(j)
            for r, j in zip(rows, row_jobs, strict=True)
        ]
        out = decode_jobs(engine, tokenizer, row_jobs, row_sessions, config, mode, model_name)
        return [(out[id(j)].text, out[id(j)]) for j in row_jobs]

    def streamed(step: int, text: str) -> None:
        if jobs[step].on_text is not None:
            jobs[step].on_text(text)

    done: dict[int, StepOutcome] = {}
    for job, step in zip(jobs, decode_steps(steps, decode_rows, on_text=streamed), strict=True):
        usage = replace(step.first[0].usage)
        for part in step.first[1:]:
            usage = added(usage, part.usage)
        if step.parts is not None:
            # The parts are rows of the same forward passes: the step took as many
            # passes as its longest part, and the tokens of all.
            usage.forward_passes = max(part.usage.forward_passes for part in step.first)
            note = f"{SPLIT} {' | '.join(step.parts)}"
            if step.whole is not None:
                usage = added(step.whole.usage, usage)
                note += f" ({NOT_JOINED})"
            usage.reason += f"; {note}"
        if step.follow_up_error is not None:
            usage.reason += f"; {FOLLOW_UP} {step.follow_up} (failed: {step.follow_up_error})"
        elif step.follow_up_row is not None:
            usage = added(usage, step.follow_up_row.usage)  # the follow-up's cost, kept or not
            dropped = "" if step.follow_up_kept else f" (dropped: {DROPPED})"
            usage.reason += f"; {FOLLOW_UP} {step.follow_up}{dropped}"
        done[id(job)] = StepOutcome(text=step.text, usage=usage)
    return done


def _row_job(job: StepJob, part: str | None) -> StepJob:
    """``job`` itself, or the job that decodes ``part`` of its request."""
    if part is None:
        return job
    made = part_job(job, part)
    if made is None:  # the flow splits and follows up only right after the request
        raise ValueError(f"the step's conversation does not end with its request: {part!r}")
    return made


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
