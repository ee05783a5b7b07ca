"""The plan-act-observe loop of one run (DESIGN §2), as an async stream of events.

Each step: ask the active agent's model for one action (constrained by the action
schema for the embedded models), then either validate the final output and stop,
or run the called tools concurrently and append their results as observations.
Invalid actions from unconstrained models (unparseable text, unknown tools, bad
arguments, an output that does not validate) are fed back and retried, at most
``max_retries`` times in a row. The run stops at ``max_steps`` with the partial
run attached to :class:`MaxStepsExceeded`. With a store, every step is
checkpointed, so :meth:`Runner.restore` can pick a crashed run up where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentflow.engine.chat_template import ChatMessage, compact_json

from .context import RunContext
from .durable import RunStore, StoredRun
from .errors import MaxStepsExceeded, ModelBehaviorError, RunError, RunStateError
from .events import (
    AgentEvent,
    DraftText,
    Event,
    FinalEvent,
    HandoffEvent,
    RetryEvent,
    RunFailed,
    RunStart,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
)
from .execution import act
from .models.base import Action, ActionParseError, StepDelta, StepResponse, StepUsage, ToolCall
from .result import RunResult, StepRecord, ToolOutcome
from .resume import restore_run
from .usage import RunUsage

if TYPE_CHECKING:
    from .agent import Agent
    from .tracing import Tracer


@dataclass
class _Pending:
    """A step whose action is recorded but whose tools did not all finish (resume only)."""

    index: int
    record: StepRecord
    results: dict[str, ToolOutcome] = field(default_factory=dict)


class Runner:
    """State of one run; iterate :meth:`events` to drive it."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        *,
        run_id: str,
        input: str,
        history: Sequence[ChatMessage] = (),
        deps: Any = None,
        store: RunStore | None = None,
        tracer: Tracer | None = None,
        stream: bool = False,
    ) -> None:
        self.root = agent
        self.agents = agent.reachable_agents()
        self.active = agent
        self.run_id = run_id
        self.input = input
        self.history = list(history)
        self.messages: list[ChatMessage] = [*history, ChatMessage(role="user", content=input)]
        self.deps = deps
        self.store = store
        self.tracer = tracer
        self.stream = stream
        self.steps: list[StepRecord] = []
        self.usage = RunUsage()
        self.trace: list[Event] = []
        self.next_step = 0
        self.retries = 0
        self.resumed = False
        self._pending: _Pending | None = None
        #: Set when pydantic rejected a final output: an ``auto`` agent re-does the step in hybrid.
        self._escalate: str | None = None
        self._started = time.perf_counter()

    # -- resume ---------------------------------------------------------------------------------

    def restore(self, stored: StoredRun) -> None:
        """Continue from the store's record of this run (see :mod:`agentflow.resume`)."""
        state = restore_run(stored, self.root.name)
        self.resumed = True
        self.messages = state.messages
        self.steps = state.steps
        self.usage = state.usage
        self.next_step = state.next_step
        self.retries = state.retries
        self.active = self._agent_named(state.active)
        if state.pending is not None:
            record, results = state.pending
            self._pending = _Pending(record.index, record, results)

    def _agent_named(self, name: str) -> Agent[Any, Any]:
        if name not in self.agents:
            raise RunStateError(
                f"agent {name!r} of the stored run is not reachable from {self.root.name!r}"
            )
        return self.agents[name]

    # -- the loop -------------------------------------------------------------------------------

    def _emit(self, event: Event) -> Event:
        self.trace.append(event)
        if self.tracer is not None:
            self.tracer.emit(event)
        return event

    def result(self, output: Any, *, completed: bool) -> RunResult[Any]:
        """The run so far as a :class:`RunResult`."""
        return RunResult(
            output=output,
            run_id=self.run_id,
            agent=self.active.name,
            steps=self.steps,
            usage=self.usage,
            trace=self.trace,
            messages=self.messages,
            seconds=time.perf_counter() - self._started,
            completed=completed,
        )

    async def events(self) -> AsyncIterator[AgentEvent]:
        """Drive the run; yields every event, ending with :class:`FinalEvent` or raising a :class:`RunError`."""
        try:
            async for event in self._loop():
                yield event
        except RunError as exc:
            if exc.partial is None:
                exc.partial = self.result(None, completed=False)
            if self.store is not None:
                await self.store.finish_run(
                    self.run_id, "failed", error=f"{type(exc).__name__}: {exc}"
                )
            yield self._fail(str(exc))
            raise
        except Exception as exc:
            # A crash (model or store failure): the stored run stays "running" so it can resume.
            self._fail(f"{type(exc).__name__}: {exc}")
            raise

    def _new(self, cls: type[Event], agent: str, step: int, **fields: Any) -> Any:
        """Create, record and return an event of this run."""
        return self._emit(cls(run_id=self.run_id, agent=agent, step=step, **fields))

    def _fail(self, message: str) -> RunFailed:
        return self._new(RunFailed, self.active.name, self.next_step, error=message)

    async def _loop(self) -> AsyncIterator[AgentEvent]:
        if self.store is not None and not self.resumed:
            await self.store.create_run(self.run_id, self.root.name, self.input, self.history)
        yield self._new(RunStart, self.active.name, -1, input=self.input, resumed=self.resumed)
        if self._pending is not None:
            pending, self._pending = self._pending, None
            async for event in self._act(pending.record, pending.results):
                yield event
        last = self.steps[-1] if self.steps else None
        if self.resumed and last is not None and last.action is not None and last.action.is_final:
            # The final step was recorded but the run was not marked completed: finish it.
            async for event in self._finish(last, self.active.validate_output(last.action.final)):
                yield event
            return
        max_steps = self.root.max_steps
        while True:
            if self.next_step >= max_steps:
                raise MaxStepsExceeded(
                    f"agent {self.root.name!r} reached max_steps={max_steps} without a final output"
                )
            index = self.next_step
            agent = self.active
            yield self._new(StepStart, agent.name, index)
            request = agent.build_request(self.messages, escalate=self._escalate)
            self._escalate = None
            model = agent.resolved_model()
            response: StepResponse | None = None
            t0 = time.perf_counter()
            try:
                if self.stream:
                    async for item in model.stream_step(request):
                        if isinstance(item, StepDelta):
                            yield self._new(DraftText, agent.name, index, text=item.text)
                        else:
                            response = item
                    if response is None:
                        raise ActionParseError(
                            "the model's stream ended without a response", text=""
                        )
                else:
                    response = await model.step(request)
            except ActionParseError as exc:
                usage = StepUsage(seconds=time.perf_counter() - t0, model=model.name)
                async for event in self._reject(
                    index, None, exc.text, usage, f"invalid action: {exc}"
                ):
                    yield event
                continue
            action = self._with_ids(response.action, index)
            output: Any = None
            if action.is_final:
                try:
                    output = agent.validate_output(action.final)
                except ValidationError as exc:
                    reason = f"invalid final output: {_short(exc)}"
                    self._escalate = f"validation: {_short(exc)}"
                    async for event in self._reject(
                        index, action, response.text, response.usage, reason
                    ):
                        yield event
                    continue
            record = StepRecord(
                index=index,
                agent=agent.name,
                action=action,
                text=response.text,
                usage=response.usage,
            )
            self.steps.append(record)
            self.usage.add_step(response.usage)
            self.next_step = index + 1
            if self.store is not None:
                await self.store.record_step(
                    self.run_id, index, agent.name, action, response.text, response.usage
                )
            yield self._new(
                StepEnd, agent.name, index, action=action.to_json(), usage=response.usage
            )
            if action.is_final:
                self.messages.append(ChatMessage(role="assistant", content=action.to_json()))
                if self.store is not None:
                    await self.store.complete_step(
                        self.run_id, index, self.messages[-1:], agent.name
                    )
                async for event in self._finish(record, output):
                    yield event
                return
            async for event in self._act(record, {}):
                yield event

    async def _finish(self, record: StepRecord, output: Any) -> AsyncIterator[AgentEvent]:
        if self.store is not None:
            await self.store.finish_run(self.run_id, "completed", output=output)
        result = self.result(output, completed=True)
        yield self._new(FinalEvent, record.agent, record.index, output=output, result=result)

    async def _act(
        self, record: StepRecord, replayed: dict[str, ToolOutcome]
    ) -> AsyncIterator[AgentEvent]:
        """Run a step's tool calls, append the observations, checkpoint, switch agent on a handoff."""
        agent = self._agent_named(record.agent)
        action = record.action
        assert action is not None
        index = record.index
        tools = agent.tool_map
        for call in action.tool_calls:
            if call.id not in replayed:
                yield self._new(
                    ToolCallEvent,
                    agent.name,
                    index,
                    call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                )

        async def record_outcome(outcome: ToolOutcome) -> None:
            if self.store is not None:
                await self.store.record_tool_result(self.run_id, index, outcome)

        def make_context(call_id: str) -> RunContext[Any]:
            return RunContext(
                run_id=self.run_id,
                agent_name=agent.name,
                step=index,
                deps=self.deps,
                usage=self.usage,
                messages=tuple(self.messages),
                call_id=call_id,
            )

        done = await act(
            action.tool_calls,
            tools,
            make_context=make_context,
            default_timeout=agent.tool_timeout,
            on_finish=record_outcome,
            replayed=replayed,
        )
        record.tool_results = done.outcomes
        self.usage.tool_calls += len(done.outcomes)
        self.usage.tool_seconds += done.seconds
        for outcome in done.finished_order:
            yield self._new(
                ToolResultEvent,
                agent.name,
                index,
                call_id=outcome.call_id,
                name=outcome.name,
                result=outcome.result,
                error=outcome.error,
                seconds=outcome.seconds,
                replayed=outcome.replayed,
            )
        appended = [ChatMessage(role="assistant", content=action.to_json())]
        appended += [
            ChatMessage(role="tool", name=o.name, content=compact_json(o.observation()))
            for o in done.outcomes
        ]
        self.messages.extend(appended)
        next_agent = agent
        for outcome in done.outcomes:
            target = tools[outcome.name].metadata.get("handoff") if outcome.name in tools else None
            if target is not None and outcome.ok:
                next_agent = self._agent_named(target.name)
                break
        if self.store is not None:
            await self.store.complete_step(self.run_id, index, appended, next_agent.name)
        if done.rejected:
            record.retry_reason = "; ".join(done.rejected)
            self.retries += 1
            yield self._new(RetryEvent, agent.name, index, reason=record.retry_reason)
            self._check_retries(agent, record.retry_reason)
        else:
            self.retries = 0
        if next_agent is not agent:
            yield self._new(HandoffEvent, agent.name, index, to_agent=next_agent.name)
            self.active = next_agent

    async def _reject(
        self, index: int, action: Action | None, text: str, usage: StepUsage, reason: str
    ) -> AsyncIterator[AgentEvent]:
        """Record a step whose action was invalid, feed the reason back, count the retry."""
        agent = self.active
        self.steps.append(
            StepRecord(
                index=index,
                agent=agent.name,
                action=action,
                text=text,
                usage=usage,
                retry_reason=reason,
            )
        )
        self.usage.add_step(usage)
        self.next_step = index + 1
        appended = [
            ChatMessage(role="assistant", content=action.to_json() if action else text),
            ChatMessage(role="user", content=f"Error: {reason}. Reply with a corrected action."),
        ]
        self.messages.extend(appended)
        if self.store is not None:
            await self.store.record_step(
                self.run_id, index, agent.name, action, text, usage, reason
            )
            await self.store.complete_step(self.run_id, index, appended, agent.name)
        self.retries += 1
        yield self._new(RetryEvent, agent.name, index, reason=reason)
        self._check_retries(agent, reason)

    def _check_retries(self, agent: Agent[Any, Any], reason: str) -> None:
        if self.retries > agent.max_retries:
            raise ModelBehaviorError(
                f"model {agent.resolved_model().name!r} produced {self.retries} invalid actions in a row "
                f"(max_retries={agent.max_retries}); last: {reason}"
            )

    def _with_ids(self, action: Action, index: int) -> Action:
        # Runtime ids, unique within the run (a model's own ids may repeat across steps);
        # remote back-ends match tool results to calls by position.
        if action.is_final:
            return action
        return Action(
            tool_calls=tuple(
                ToolCall(name=c.name, arguments=c.arguments, id=f"s{index}c{i}")
                for i, c in enumerate(action.tool_calls)
            )
        )


def _short(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'output'}: {e['msg']}"
        for e in exc.errors(include_url=False)
    )
