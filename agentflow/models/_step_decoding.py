"""Decoding a batch of step jobs with an engine, and the follow-up calls their actions owe.

Runs in ``EmbeddedModel``'s worker thread. :func:`decode_jobs` makes one engine
call for a batch of jobs and turns each row into a :class:`StepOutcome` (text and
usage). :func:`decode_follow_ups` then finds the actions whose calls leave a part
of the request with values untouched (:mod:`agentflow.engine.call_coverage`),
decodes one more call for them from ``…},{"name":"`` in a second engine call, and
keeps each where the new call uses a value left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._step_jobs import StepJob, StepOutcome
from .base import StepUsage

#: How a step's usage reason names its follow-up call (then the part it was for).
FOLLOW_UP = "a follow-up call for:"

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
    *,
    prompts: Sequence[str | list[int]] | None = None,
    priors: Sequence[str | list[int] | None] | None = None,
    streamed: Sequence[list[int]] | None = None,
) -> dict[int, StepOutcome]:
    """Decode ``jobs`` (one mode, one config) in one ``engine.generate`` call; the
    outcomes by ``id(job)``. ``prompts``/``priors`` replace the jobs' own (token ids
    of a follow-up); ``streamed``: tokens already shown to each job's ``on_text``
    (a follow-up's prefix), which its streamed text goes on from."""
    pieces = [list(s) for s in streamed] if streamed is not None else [[] for _ in jobs]

    def on_block(row: int, ids: list[int]) -> None:
        job = jobs[row]
        if job.on_text is not None:
            pieces[row].extend(ids)
            job.on_text(tokenizer.decode(pieces[row]))

    kwargs: dict[str, Any] = {
        "constraints": list(sessions),
        "on_block": on_block,
        "choice_priors": list(priors) if priors is not None else [j.prior for j in jobs],
    }
    if mode in ("hybrid", "auto"):
        kwargs.update(mode=mode, reason=jobs[0].reason)
    chosen = list(prompts) if prompts is not None else [j.prompt for j in jobs]
    result = engine.generate(chosen, config, **kwargs)
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
    new_session: Callable[[StepJob, FollowUp], Any],
) -> int:
    """Decode the follow-up calls that the outcomes ``done`` of ``jobs`` owe, and
    put each action whose new call uses a value left in ``done`` (its usage counts
    both decodes); how many were kept. ``new_session(job, follow_up)``: a fresh
    constraint session for the follow-up of ``job``."""
    from agentflow.engine.call_coverage import follow_up_rows

    owed = follow_up_rows(
        [done[id(j)].text for j in jobs],
        [j.request for j in jobs],
        [j.prompt for j in jobs],
        [j.prior for j in jobs],
        tokenizer,
        lambda row, follow: new_session(jobs[row], follow),
        config.max_new_tokens,
    )
    if not owed:
        return 0
    room = config.max_new_tokens - min(r.prefix_tokens for r in owed)
    again = [jobs[r.row] for r in owed]
    more = decode_jobs(
        engine,
        tokenizer,
        again,
        [r.session for r in owed],
        replace(config, max_new_tokens=room),
        mode,
        model_name,
        prompts=[r.prompt for r in owed],
        priors=[r.prior for r in owed],
        streamed=[r.prompt[len(r.prompt) - r.prefix_tokens :] for r in owed],
    )
    kept = 0
    for r, job in zip(owed, again, strict=True):
        extra = more[id(job)]
        action = r.action(extra.text)
        first = done[id(job)]
        usage = replace(  # the follow-up's passes are the step's cost, kept or not
            first.usage,
            forward_passes=first.usage.forward_passes + extra.usage.forward_passes,
            forced_tokens=first.usage.forced_tokens + extra.usage.forced_tokens,
            cached_input_tokens=first.usage.cached_input_tokens + extra.usage.cached_input_tokens,
        )
        if action is None:
            usage.reason += (
                f"; {FOLLOW_UP} {r.follow.untouched} (dropped: it used none of its values)"
            )
            done[id(job)] = StepOutcome(text=first.text, usage=usage)
            if job.on_text is not None:  # the streamed draft goes back to the action kept
                job.on_text(first.text)
            continue
        usage.output_tokens = r.prefix_tokens + extra.usage.output_tokens
        usage.reason += f"; {FOLLOW_UP} {r.follow.untouched}"
        done[id(job)] = StepOutcome(text=action, usage=usage)
        kept += 1
    return kept


def _served_reason(served: ServedMode) -> str:
    """Why the step was served in its mode; an ``auto`` fallback that kept the
    diffusion draft's confident blocks says how many tokens they held."""
    if served.diffusion_tokens:
        return f"{served.reason}; kept {served.diffusion_tokens} diffusion tokens"
    return served.reason
