"""Decoding a batch of step jobs with an engine; the calls their actions owe, and those to drop.

Runs in ``EmbeddedModel``'s worker thread. :func:`decode_jobs` makes one engine
call for a batch of jobs and turns each row into a :class:`StepOutcome` (text and
usage). :func:`decode_follow_ups` then finds the actions whose calls leave a part
of the request with values untouched (:mod:`agentflow.engine.call_coverage`),
decodes that part as a request of its own in a second engine call, and merges the
new calls into each action where they use a value left. :func:`drop_redundant_calls`
then drops the calls after an action's first that take no new value from the
conversation, :func:`restore_near_copies` puts back the request's values a call
wrote almost right (before, a restored value of a wrong call would pass for a
clause served and hold back the follow-up that replaces it), and
:func:`drop_made_up_options` last drops optional arguments nobody gave values for.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._step_jobs import StepJob, StepOutcome, follow_up_job
from .base import StepRequest, StepUsage

#: How a step's usage reason names its follow-up call (then the part it was for).
FOLLOW_UP = "a follow-up call for:"
#: Why a follow-up's calls were not kept.
DROPPED = "no new call used one of its values"
#: How a step's usage reason names the redundant calls dropped (then their names).
REDUNDANT = "dropped redundant calls:"
#: How a step's usage reason names the near copies restored (then written → restored).
RESTORED = "restored near copies:"
#: How a step's usage reason names the made-up options dropped (then tool.argument).
MADE_UP = "dropped made-up options:"

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


def drop_redundant_calls(jobs: Sequence[StepJob], done: dict[int, StepOutcome]) -> int:
    """Drop the redundant calls of the outcomes ``done`` of ``jobs``
    (:func:`~agentflow.engine.call_coverage.without_redundant_calls`); their usage
    reason names the calls dropped. How many actions lost calls."""
    from agentflow.engine.call_coverage import action_calls, without_redundant_calls

    def mend(job: StepJob, step: StepRequest, text: str) -> tuple[str, str] | None:
        kept = without_redundant_calls(text, step.messages, step.instructions, job.schema)
        if kept is None:
            return None
        names = Counter(c["name"] for c in action_calls(text) or [])
        names.subtract(c["name"] for c in action_calls(kept) or [])
        return kept, f"{REDUNDANT} {', '.join(sorted(names.elements()))}"

    return _mend_each(jobs, done, mend)


def restore_near_copies(jobs: Sequence[StepJob], done: dict[int, StepOutcome]) -> int:
    """Restore the near copies in the outcomes ``done`` of ``jobs``
    (:func:`agentflow.engine.near_copies.restore_near_copies`); their usage reason
    names each (written → restored). How many actions changed."""
    from agentflow.engine.near_copies import restore_near_copies as restored_copies

    def mend(job: StepJob, step: StepRequest, text: str) -> tuple[str, str] | None:
        found = restored_copies(text, step.messages, step.instructions, job.schema)
        if found is None:
            return None
        restored, pairs = found
        return restored, f"{RESTORED} " + ", ".join(f"{a} → {b}" for a, b in pairs)

    return _mend_each(jobs, done, mend)


def drop_made_up_options(jobs: Sequence[StepJob], done: dict[int, StepOutcome]) -> int:
    """Drop the made-up optional arguments in the outcomes ``done`` of ``jobs``
    (:func:`agentflow.engine.made_up_options.without_made_up_options`); their usage
    reason names each (``tool.argument``). How many actions changed."""
    from agentflow.engine.made_up_options import without_made_up_options

    def mend(job: StepJob, step: StepRequest, text: str) -> tuple[str, str] | None:
        found = without_made_up_options(
            text, step.messages, job.tools, step.instructions, job.schema
        )
        return None if found is None else (found[0], f"{MADE_UP} {', '.join(found[1])}")

    return _mend_each(jobs, done, mend)


def _mend_each(
    jobs: Sequence[StepJob],
    done: dict[int, StepOutcome],
    mend: Callable[[StepJob, StepRequest, str], tuple[str, str] | None],
) -> int:
    """Put ``mend(job, step, text)``'s text in place of each job's outcome in ``done``
    where it gives one, its note added to the usage reason and the text streamed;
    how many changed."""
    changed = 0
    for job in jobs:
        outcome = done[id(job)]
        mended = None if job.step is None else mend(job, job.step, outcome.text)
        if mended is None:
            continue
        text, note = mended
        usage = replace(outcome.usage)
        usage.reason += f"; {note}"
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
