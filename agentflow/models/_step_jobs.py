"""What one step of ``EmbeddedModel`` asks of the engine (a job), and what it gets back.

A job is built on the event loop from the step's request — the rendered prompt,
the action schema, the choice prior, the texts values may be copied from, the
tool-choice weights — and decoded in a worker thread with the other jobs of its
batch (``EmbeddedModel._run_batch``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentflow.engine.chat_template import (
    ToolSpec,
    copy_sources,
    last_request,
    render_choice_prior,
    render_prompt,
)
from agentflow.engine.tool_relevance import check_weight

from .base import StepRequest, StepUsage

#: The decoding modes a step may ask for.
MODES = ("diffusion", "hybrid", "ar", "auto")
#: Step settings that are not decoding knobs.
STEP_SETTINGS = ("reason", "tool_relevance", "tool_similarity", "answer_bonus", "follow_up_calls")


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
    follow_up_calls: bool,
) -> StepJob:
    """The job of ``request``; its ``settings`` may override the mode's ``reason``,
    the tool-choice weights, the answer bonus and ``follow_up_calls`` (ValueError
    names a mode, weight or flag out of range)."""
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
    answer = check_weight(request.settings.get("answer_bonus", answer_bonus), "answer_bonus")
    follow_up = request.settings.get("follow_up_calls", follow_up_calls)
    if not isinstance(follow_up, bool):
        raise ValueError(f"follow_up_calls must be true or false, got {follow_up!r}")
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
    )
