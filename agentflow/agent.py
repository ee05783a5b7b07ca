"""``Agent``: instructions, tools, an output type and a model, run by the plan-act-observe loop."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio
from pydantic import TypeAdapter

from agentflow.engine.chat_template import ChatMessage

from .durable import RunStore
from .errors import AgentflowError, ToolDefinitionError, ensure_no_running_loop
from .events import AgentEvent, FinalEvent
from .models.base import DecodingMode, Model, StepRequest
from .result import RunResult
from .runner import Runner
from .tool import Tool, _strip_titles, as_tool
from .tracing import Tracer

DepsT = TypeVar("DepsT")
OutputT = TypeVar("OutputT")

_AGENT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


def _output_schema(output_type: Any) -> dict[str, Any] | None:
    if output_type is str:
        return None
    return _strip_titles(TypeAdapter(output_type).json_schema())


class Agent(Generic[DepsT, OutputT]):
    """An agent: what it is told, what it can call, what it must return, which model decides.

    ``await agent.run("...")`` returns a :class:`RunResult`; ``agent.run_stream`` yields
    the run's events; ``agent.resume(run_id)`` continues a crashed durable run.
    """

    def __init__(
        self,
        name: str = "agent",
        instructions: str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        *,
        output_type: type[OutputT] | Any = str,
        model: Model | str | None = None,
        max_steps: int = 10,
        max_retries: int = 3,
        tool_timeout: float | None = 30.0,
        mode: DecodingMode | None = None,
        handoffs: Sequence[Agent[Any, Any] | Tool] = (),
        store: RunStore | str | Path | None = None,
        tracer: Tracer | None = None,
        model_settings: Mapping[str, Any] | None = None,
        parallel_tool_calls: bool = True,
        description: str = "",
    ) -> None:
        if not _AGENT_NAME.match(name):
            raise AgentflowError(f"agent name {name!r} must match {_AGENT_NAME.pattern}")
        if max_steps < 1:
            raise AgentflowError(f"max_steps must be at least 1, got {max_steps}")
        if max_retries < 0:
            raise AgentflowError(f"max_retries must be >= 0, got {max_retries}")
        if tool_timeout is not None and tool_timeout <= 0:
            raise AgentflowError(f"tool_timeout must be positive or None, got {tool_timeout}")
        if mode is not None and mode not in ("diffusion", "hybrid", "ar", "auto"):
            raise AgentflowError(f"mode must be diffusion, hybrid, ar or auto; got {mode!r}")
        self.name = name
        self.instructions = instructions
        self.description = description or (instructions or "").split("\n")[0][:200]
        self.tools: list[Tool] = [as_tool(t) for t in tools]
        self.output_type = output_type
        self.output_schema = _output_schema(output_type)
        self._output_adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        self.model = model
        self.max_steps = max_steps
        self.max_retries = max_retries
        self.tool_timeout = tool_timeout
        self.mode = mode
        self.store = store if isinstance(store, RunStore) or store is None else RunStore(store)
        self.tracer = tracer
        self.model_settings = dict(model_settings or {})
        self.parallel_tool_calls = parallel_tool_calls
        self._handoff_specs = list(handoffs)
        self._model: Model | None = (
            model if model is not None and not isinstance(model, str) else None
        )

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, tools={[t.name for t in self.tools]})"

    # -- what the model sees --------------------------------------------------------------------

    @cached_property
    def handoff_tools(self) -> list[Tool]:
        """One ``transfer_to_<agent>`` tool per handoff target."""
        from .handoffs import handoff

        return [h if isinstance(h, Tool) else handoff(h) for h in self._handoff_specs]

    @cached_property
    def tool_map(self) -> dict[str, Tool]:
        """Every tool the model may call (handoffs included), by name."""
        out: dict[str, Tool] = {}
        for t in [*self.tools, *self.handoff_tools]:
            if t.name in out:
                raise ToolDefinitionError(f"agent {self.name!r} has two tools named {t.name!r}")
            out[t.name] = t
        return out

    @cached_property
    def action_schema(self) -> dict[str, Any]:
        """JSON Schema of one step's action: tool calls or the final output."""
        from .action_schema import build_action_schema

        return build_action_schema(
            [t.spec for t in self.tool_map.values()],
            self.output_schema,
            parallel_calls=self.parallel_tool_calls,
        )

    def build_request(
        self, messages: Sequence[ChatMessage], *, escalate: str | None = None
    ) -> StepRequest:
        """The model request for the next step of a conversation.

        ``escalate`` (a reason) re-does the step in hybrid mode when the agent runs in
        ``auto`` mode: the runtime does this after pydantic rejected the parsed action.
        """
        mode, settings = self.mode, self.model_settings
        effective = mode or getattr(self.resolved_model(), "mode", None)
        if escalate is not None and effective == "auto":
            mode, settings = "hybrid", {**settings, "reason": escalate}
        return StepRequest(
            messages=tuple(messages),
            tools=tuple(t.spec for t in self.tool_map.values()),
            action_schema=self.action_schema,
            output_schema=self.output_schema,
            instructions=self.instructions,
            mode=mode,
            settings=settings,
        )

    def validate_output(self, value: Any) -> OutputT:
        """The final output validated into ``output_type`` (``pydantic.ValidationError`` if not)."""
        return self._output_adapter.validate_python(value)

    def resolved_model(self) -> Model:
        """The model instance (a name given at construction is loaded on first use)."""
        if self._model is None:
            from .models import infer_model

            self._model = infer_model(self.model if isinstance(self.model, str) else None)
        return self._model

    def reachable_agents(self) -> dict[str, Agent[Any, Any]]:
        """This agent and every agent reachable through handoffs, by name."""
        found: dict[str, Agent[Any, Any]] = {}
        queue: list[Agent[Any, Any]] = [self]
        while queue:
            agent = queue.pop()
            if agent.name in found:
                if found[agent.name] is not agent:
                    raise AgentflowError(f"two different agents are named {agent.name!r}")
                continue
            found[agent.name] = agent
            queue.extend(t.metadata["handoff"] for t in agent.handoff_tools)
        return found

    # -- running --------------------------------------------------------------------------------

    def _runner(
        self,
        input: str,
        *,
        deps: Any,
        message_history: Sequence[ChatMessage],
        run_id: str | None,
        stream: bool,
    ) -> Runner:
        if not isinstance(input, str):
            raise TypeError(f"agent input must be a str, got {type(input).__name__}")
        return Runner(
            self,
            run_id=run_id or uuid.uuid4().hex,
            input=input,
            history=message_history,
            deps=deps,
            store=self.store,
            tracer=self.tracer,
            stream=stream,
        )

    @staticmethod
    async def _drive(runner: Runner) -> RunResult[Any]:
        async for event in runner.events():
            if isinstance(event, FinalEvent):
                assert event.result is not None
                return event.result
        raise AgentflowError("the run ended without a final event")  # pragma: no cover

    async def run(
        self,
        input: str,
        *,
        deps: DepsT | None = None,
        message_history: Sequence[ChatMessage] = (),
        run_id: str | None = None,
    ) -> RunResult[OutputT]:
        """Run to a final output; raises :class:`MaxStepsExceeded` / :class:`ModelBehaviorError`
        with the partial run attached."""
        runner = self._runner(
            input, deps=deps, message_history=message_history, run_id=run_id, stream=False
        )
        return await self._drive(runner)

    def run_sync(self, input: str, **kwargs: Any) -> RunResult[OutputT]:
        """:meth:`run` for synchronous code (starts its own event loop)."""
        ensure_no_running_loop("agent.run_sync", "await agent.run(...)")
        return anyio.run(lambda: self.run(input, **kwargs))

    async def run_stream(
        self,
        input: str,
        *,
        deps: DepsT | None = None,
        message_history: Sequence[ChatMessage] = (),
        run_id: str | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Yield the run's events as they happen (draft text included); the last is :class:`FinalEvent`."""
        runner = self._runner(
            input, deps=deps, message_history=message_history, run_id=run_id, stream=True
        )
        async for event in runner.events():
            yield event

    async def _restored(self, run_id: str, deps: Any, stream: bool) -> Runner:
        if self.store is None:
            raise AgentflowError(f"agent {self.name!r} has no run store; pass store=... to resume")
        stored = await self.store.load_run(run_id)
        runner = self._runner(
            stored.input, deps=deps, message_history=stored.history, run_id=run_id, stream=stream
        )
        runner.restore(stored)
        return runner

    async def resume(self, run_id: str, *, deps: DepsT | None = None) -> RunResult[OutputT]:
        """Continue a stored run that did not finish; finished tool calls are replayed, not re-run."""
        return await self._drive(await self._restored(run_id, deps, stream=False))

    async def resume_stream(
        self, run_id: str, *, deps: DepsT | None = None
    ) -> AsyncIterator[AgentEvent]:
        """:meth:`resume`, yielding events."""
        runner = await self._restored(run_id, deps, stream=True)
        async for event in runner.events():
            yield event

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a tool another agent can call with a task; see :mod:`agentflow.handoffs`."""
        from .handoffs import agent_tool

        return agent_tool(self, name=name, description=description)
