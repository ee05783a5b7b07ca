"""A scripted model for the server tests: answers each step from a list."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import anyio

from agentflow.models.base import Action, StepDelta, StepRequest, StepResponse, StepUsage


class ScriptedModel:
    """Answers each step with the next scripted action (or a function of the request)."""

    def __init__(self, name: str = "tiny") -> None:
        self._name = name
        self.script: list[Action | Exception | Callable[[StepRequest], Action]] = []
        self.requests: list[StepRequest] = []
        self.drafts: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    def _next(self, request: StepRequest) -> Action:
        self.requests.append(request)
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item(request) if callable(item) else item

    async def step(self, request: StepRequest) -> StepResponse:
        action = self._next(request)
        usage = StepUsage(
            input_tokens=12,
            output_tokens=5,
            forward_passes=3,
            cached_input_tokens=8,
            mode="diffusion",
            model=self._name,
        )
        return StepResponse(action=action, text=action.to_json(), usage=usage)

    async def stream_step(self, request: StepRequest) -> AsyncIterator[StepDelta | StepResponse]:
        """Drafts come from a producer task, as in the embedded model: the task group
        stays open across yields, so the consumer must iterate in a single task."""
        action = self._next(request)
        send, receive = anyio.create_memory_object_stream[str](len(self.drafts) + 1)

        async def produce() -> None:
            async with send:
                for draft in self.drafts:
                    await send.send(draft)

        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            async with receive:
                async for draft in receive:
                    yield StepDelta(text=draft)
        usage = StepUsage(
            input_tokens=12, output_tokens=5, forward_passes=3, mode="diffusion", model=self._name
        )
        yield StepResponse(action=action, text=action.to_json(), usage=usage)
