"""Decoding a batch of step jobs with an engine; the calls their actions owe, and those to drop.

Runs in ``EmbeddedModel``'s worker thread. :func:`decode_jobs` makes one engine
call for a batch of jobs and turns each row into a :class:`StepOutcome` (text and
usage). :func:`decode_follow_ups` then finds the actions whose calls leave a part
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

from ._step_jobs import StepJob, StepOutcome, follow_up_job
from .base import StepUsage

#: How a step's usage reason names its follow-up call (then the part it was for).
FOLLOW_UP = "a follow-up call for:"
#: Why a follow-up's calls were not kept.
DROPPED = "no new call used one of its values"

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from agentflow.engine.call_coverage import FollowUp
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
        out[id(job)] = StepOutcome(text=texts[i], usage=usage)
    return out


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
    (:func:`follow_up_job`), and put each merged action whose new calls use a value
    left in ``done`` (its usage counts both decodes, kept or not); how many were
    kept. ``new_session(job)``: a constraint session for a follow-up's job. Where
    the second decode fails, the first actions stand and their reason says so."""
    from agentflow.engine.call_coverage import follow_up

    owed: list[tuple[StepJob, FollowUp, StepJob]] = []
    for job in jobs:
        follow = follow_up(done[id(job)].text, job.request)
        if follow is None or not follow.fits(job.schema):
            continue
        again = follow_up_job(job, follow.untouched)
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
        usage = replace(  # the follow-up's decode is the step's cost, kept or not
            first.usage,
            input_tokens=first.usage.input_tokens + extra.usage.input_tokens,
            output_tokens=first.usage.output_tokens + extra.usage.output_tokens,
            forward_passes=first.usage.forward_passes + extra.usage.forward_passes,
            forced_tokens=first.usage.forced_tokens + extra.usage.forced_tokens,
            cached_input_tokens=first.usage.cached_input_tokens + extra.usage.cached_input_tokens,
        )
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
