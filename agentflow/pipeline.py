"""Pipeline helpers: sequence, fan-out/fan-in, router — built from agents or other pipelines.

Every stage is *runnable*: it has ``name`` and ``async run(input, *, deps=None)``
returning something with ``output`` and ``usage`` (an :class:`Agent`'s
:class:`RunResult`, or a :class:`PipelineResult`). A stage's output becomes the
next stage's input as text (a string as is, anything else as compact JSON).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import anyio

from agentflow.engine.chat_template import compact_json

from .errors import AgentflowError, ensure_no_running_loop
from .events import jsonable
from .usage import RunUsage


@runtime_checkable
class StageResult(Protocol):
    output: Any
    usage: RunUsage


@runtime_checkable
class Runnable(Protocol):
    """An agent or a pipeline."""

    name: str

    async def run(self, input: str, *, deps: Any = None) -> Any: ...


@dataclass
class PipelineResult:
    """Output of a pipeline, the results of the stages that ran (in order), total usage."""

    output: Any
    stages: list[tuple[str, Any]] = field(default_factory=list)
    usage: RunUsage = field(default_factory=RunUsage)
    #: For a router: the route it took.
    route: str | None = None


class RouteError(AgentflowError):
    """A router's classifier chose a route that does not exist (and there is no default)."""


def as_text(value: Any) -> str:
    """How one stage's output is handed to the next stage."""
    return value if isinstance(value, str) else compact_json(jsonable(value))


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Pipeline:
    """Base of the pipeline helpers: ``await p.run(input)`` and ``p.run_sync(input)``."""

    name: str = "pipeline"

    async def run(self, input: str, *, deps: Any = None) -> PipelineResult:
        raise NotImplementedError

    def run_sync(self, input: str, *, deps: Any = None) -> PipelineResult:
        """:meth:`run` for synchronous code."""
        ensure_no_running_loop("pipeline.run_sync", "await pipeline.run(...)")
        return anyio.run(lambda: self.run(input, deps=deps))


class SequencePipeline(Pipeline):
    """Stages one after another; each gets the previous stage's output."""

    def __init__(self, stages: Sequence[Runnable], *, name: str = "sequence") -> None:
        if not stages:
            raise AgentflowError("sequence() needs at least one stage")
        self.stages = list(stages)
        self.name = name

    async def run(self, input: str, *, deps: Any = None) -> PipelineResult:
        result = PipelineResult(output=input)
        text = input
        for stage in self.stages:
            out = await stage.run(text, deps=deps)
            result.stages.append((stage.name, out))
            result.usage.add_run(out.usage)
            result.output = out.output
            text = as_text(out.output)
        return result


Combine = Callable[[dict[str, Any]], Any] | Callable[[dict[str, Any]], Awaitable[Any]]


class FanOut(Pipeline):
    """Branches run concurrently on the same input; ``combine`` (an agent, a pipeline, or a
    function of ``{branch: output}``) fans their outputs back in."""

    def __init__(
        self,
        branches: Sequence[Runnable],
        *,
        combine: Runnable | Combine | None = None,
        name: str = "fan_out",
    ) -> None:
        if not branches:
            raise AgentflowError("fan_out() needs at least one branch")
        names = [b.name for b in branches]
        if len(set(names)) != len(names):
            raise AgentflowError(f"fan_out() branches need distinct names, got {names}")
        self.branches = list(branches)
        self.combine = combine
        self.name = name

    async def run(self, input: str, *, deps: Any = None) -> PipelineResult:
        outs: dict[str, Any] = {}

        async def branch(stage: Runnable) -> None:
            outs[stage.name] = await stage.run(input, deps=deps)

        async with anyio.create_task_group() as tg:
            for stage in self.branches:
                tg.start_soon(branch, stage)
        result = PipelineResult(output=None)
        for stage in self.branches:  # report in declaration order, not finishing order
            result.stages.append((stage.name, outs[stage.name]))
            result.usage.add_run(outs[stage.name].usage)
        outputs = {name: out.output for name, out in result.stages}
        if self.combine is None:
            result.output = outputs
        elif isinstance(self.combine, Runnable):
            combined = await self.combine.run(as_text(jsonable(outputs)), deps=deps)
            result.stages.append((self.combine.name, combined))
            result.usage.add_run(combined.usage)
            result.output = combined.output
        else:
            result.output = await _maybe_await(self.combine(outputs))
        return result


Classifier = Callable[[str], str] | Callable[[str], Awaitable[str]]


class Router(Pipeline):
    """A classifier (an agent whose output is a route name, or a function) picks one route."""

    def __init__(
        self,
        classifier: Runnable | Classifier,
        routes: Mapping[str, Runnable],
        *,
        default: str | None = None,
        name: str = "router",
    ) -> None:
        if not routes:
            raise AgentflowError("router() needs at least one route")
        if default is not None and default not in routes:
            raise AgentflowError(f"router() default {default!r} is not one of {sorted(routes)}")
        self.classifier = classifier
        self.routes = dict(routes)
        self.default = default
        self.name = name

    async def run(self, input: str, *, deps: Any = None) -> PipelineResult:
        result = PipelineResult(output=None)
        if isinstance(self.classifier, Runnable):
            decided = await self.classifier.run(input, deps=deps)
            result.stages.append((self.classifier.name, decided))
            result.usage.add_run(decided.usage)
            choice = decided.output
        else:
            choice = await _maybe_await(self.classifier(input))
        key = str(getattr(choice, "value", choice)).strip()
        if key not in self.routes:
            if self.default is None:
                raise RouteError(f"router chose {key!r}, which is not one of {sorted(self.routes)}")
            key = self.default
        out = await self.routes[key].run(input, deps=deps)
        result.stages.append((self.routes[key].name, out))
        result.usage.add_run(out.usage)
        result.output = out.output
        result.route = key
        return result


def sequence(*stages: Runnable, name: str = "sequence") -> SequencePipeline:
    """Run stages one after another, each on the previous output."""
    return SequencePipeline(stages, name=name)


def fan_out(
    *branches: Runnable, combine: Runnable | Combine | None = None, name: str = "fan_out"
) -> FanOut:
    """Run branches concurrently on one input, then fan in with ``combine``."""
    return FanOut(branches, combine=combine, name=name)


def router(
    classifier: Runnable | Classifier,
    routes: Mapping[str, Runnable],
    *,
    default: str | None = None,
    name: str = "router",
) -> Router:
    """Pick one route per input with ``classifier``, run it on the same input."""
    return Router(classifier, routes, default=default, name=name)
