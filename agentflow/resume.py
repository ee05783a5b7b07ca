"""Rebuilding a run's state from the run store, for ``Agent.resume``.

Completed steps are replayed from their recorded messages (no model call, no
tool call). A step whose tools did not all finish becomes *pending*: the runner
re-enters its act phase with the recorded outcomes, so only calls without a
record run. A step the model decided but that was never confirmed (a crash right
after the answer) is dropped, and the model is asked again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentflow.engine.chat_template import ChatMessage

from .durable import StoredRun
from .errors import RunStateError
from .result import StepRecord, ToolOutcome
from .usage import RunUsage


@dataclass
class RestoredRun:
    """What the runner needs to continue a stored run."""

    steps: list[StepRecord] = field(default_factory=list)
    messages: list[ChatMessage] = field(default_factory=list)
    usage: RunUsage = field(default_factory=RunUsage)
    next_step: int = 0
    retries: int = 0
    #: Name of the agent that takes the next step.
    active: str = ""
    #: The half-done last step and its recorded outcomes by call id.
    pending: tuple[StepRecord, dict[str, ToolOutcome]] | None = None


def restore_run(stored: StoredRun, root_agent: str) -> RestoredRun:
    """The state of ``stored`` after its last recorded event; checks that it may resume."""
    if stored.status != "running":
        raise RunStateError(f"run {stored.run_id!r} is {stored.status}; only running runs resume")
    if stored.agent != root_agent:
        raise RunStateError(
            f"run {stored.run_id!r} was started by agent {stored.agent!r}, not {root_agent!r}"
        )
    state = RestoredRun(messages=[*stored.history, ChatMessage(role="user", content=stored.input)])
    state.active = stored.agent
    for step in stored.steps:
        if not step.complete and (step.action is None or step.action.is_final):
            state.next_step = step.index
            break
        record = StepRecord(
            index=step.index,
            agent=step.agent,
            action=step.action,
            text=step.text,
            usage=step.usage,
            retry_reason=step.retry_reason,
        )
        state.usage.add_step(step.usage)
        state.steps.append(record)
        state.next_step = step.index + 1
        if step.messages is not None:
            calls = step.action.tool_calls if step.action else ()
            record.tool_results = [step.results[c.id] for c in calls if c.id in step.results]
            state.usage.tool_calls += len(record.tool_results)
            state.messages.extend(step.messages)
            state.retries = state.retries + 1 if step.retry_reason else 0
            state.active = step.next_agent or step.agent
        else:
            state.active = step.agent
            state.pending = (record, dict(step.results))
    return state
