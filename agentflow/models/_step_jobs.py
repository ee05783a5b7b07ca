"""What one step of ``EmbeddedModel`` asks of the engine (a job), and what it gets back.

A job is built on the event loop from the step's request — the rendered prompt,
the action schema, the choice prior, the texts values may be copied from, the
tool-choice weights — and decoded in a worker thread with the other jobs of its
batch (``EmbeddedModel._run_batch``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from agentflow.engine.chat_template import (
    ToolSpec,
    copy_sources,
    last_request,
    render_choice_prior,
    render_prompt,
    with_request,
)
from agentflow.engine.tool_relevance import check_weight

from .base import StepRequest, StepUsage

#: The decoding modes a step may ask for.
MODES = ("diffusion", "hybrid", "ar", "auto")
#: Step settings that are not decoding knobs.
STEP_SETTINGS = (
    "reason",
    "tool_relevance",
    "tool_similarity",
    "tool_ranker",
    "answer_bonus",
    "argument_fit",
    "split_requests",
    "follow_up_calls",
    "drop_redundant_calls",
    "restore_near_copies",
    "drop_made_up_options",
)


@dataclass
class StepJob:
    prompt: str
    schema: dict[str, Any]
    mode: str
    reason: str
    settings: dict[str, Any]
    on_text: Callable[[str], None] | None = None
    #: The conversation without its request: the prior of closed choices.
    prior: str | None = None
    #: The texts argument values may be copied from (copy choices).
    sources: list[str] = field(default_factory=list)
    #: The request and the tools its tool-name bonuses are worked out from, in the
    #: worker thread (word vectors load there), and their weights.
    request: str = ""
    tools: list[ToolSpec] = field(default_factory=list)
    relevance: float = 0.0
    similarity: float = 0.0
    #: The bonus of answering over calling where the request looks like one no tool serves.
    answer: float = 0.0
    #: Decode one more call where the action leaves part of the request untouched.
    follow_up: bool = False
    #: Drop the calls after the first that take no new value from the conversation.
    drop_redundant: bool = False
    #: Put back the request's values that a call wrote almost right.
    restore_copies: bool = False
    #: Drop optional arguments whose values nobody gave.
    drop_options: bool = False
    #: The step the job was built from (a follow-up's job is rendered from it).
    step: StepRequest | None = None
    #: Penalty per kind of value a tool cannot take from the request (argument fit);
    #: applied where the request is the conversation's last turn.
    fit: float = 0.0
    #: Decode a message holding several requests one request at a time.
    split: bool = False
    #: Weight of the tool ranker's scores on the tool-name choice.
    ranker: float = 0.0

    @property
    def follows_request(self) -> bool:
        """True when the step decodes right after its request (no tool result since)."""
        return (
            self.step is not None
            and bool(self.step.messages)
            and (self.step.messages[-1].role == "user")
        )


@dataclass
class StepOutcome:
    text: str
    usage: StepUsage


def step_job(
    request: StepRequest,
    on_text: Callable[[str], None] | None,
    *,
    mode: str,
    tool_relevance: float,
    tool_similarity: float,
    answer_bonus: float,
    argument_fit: float,
    split_requests: bool,
    tool_ranker: float = 0.0,
    follow_up_calls: bool,
    drop_redundant_calls: bool,
    restore_near_copies: bool,
    drop_made_up_options: bool,
) -> StepJob:
    """The job of ``request``; its ``settings`` may override the mode's ``reason``,
    the tool-choice weights, the answer bonus, the argument fit, ``split_requests``
    and the call checks (``follow_up_calls``, ``drop_redundant_calls``, ``restore_near_copies``,
    ``drop_made_up_options``); ValueError names a mode, weight or flag out of range."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    output = request.output_schema
    prompt = render_prompt(
        request.messages, request.tools, instructions=request.instructions, output=output
    )
    relevance = check_weight(
        request.settings.get("tool_relevance", tool_relevance), "tool_relevance"
    )
    similarity = check_weight(
        request.settings.get("tool_similarity", tool_similarity), "tool_similarity"
    )
    ranker = check_weight(request.settings.get("tool_ranker", tool_ranker), "tool_ranker")
    answer = check_weight(request.settings.get("answer_bonus", answer_bonus), "answer_bonus")
    fit = check_weight(request.settings.get("argument_fit", argument_fit), "argument_fit")
    split = _flag(request.settings, "split_requests", split_requests)
    follow_up = _flag(request.settings, "follow_up_calls", follow_up_calls)
    drop_redundant = _flag(request.settings, "drop_redundant_calls", drop_redundant_calls)
    restore_copies = _flag(request.settings, "restore_near_copies", restore_near_copies)
    drop_options = _flag(request.settings, "drop_made_up_options", drop_made_up_options)
    prior = render_choice_prior(
        request.messages, request.tools, instructions=request.instructions, output=output
    )
    return StepJob(
        prompt,
        dict(request.action_schema),
        mode,
        str(request.settings.get("reason", "requested")),
        {k: v for k, v in request.settings.items() if k not in STEP_SETTINGS},
        on_text,
        prior,
        copy_sources(request.messages),
        last_request(request.messages),
        list(request.tools),
        relevance,
        similarity,
        answer,
        follow_up,
        drop_redundant,
        restore_copies,
        drop_options,
        request,
        fit,
        split,
        ranker,
    )


def _flag(settings: dict[str, Any], name: str, default: bool) -> bool:
    value = settings.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


def part_job(job: StepJob, part: str) -> StepJob | None:
    """The job that decodes ``part`` of ``job``'s request (one request of several,
    or what its action left untouched) as a request of its own: the same
    conversation, tools and prior, ``part`` in place of the request, no answer
    bonus, no split or follow-up of its own, nothing streamed. None when the
    conversation went on after the request (tool results, an earlier action): the
    calls made since then are not ``job``'s to complete."""
    if job.step is None:
        return None
    messages = with_request(job.step.messages, part)
    if messages is None:
        return None
    step = replace(job.step, messages=messages)
    prompt = render_prompt(
        messages, step.tools, instructions=step.instructions, output=step.output_schema
    )
    return replace(
        job,
        prompt=prompt,
        on_text=None,
        sources=copy_sources(messages),
        request=part,
        answer=0.0,
        follow_up=False,
        split=False,
        step=step,
    )
