"""The OpenAI-compatible HTTP API over the runtime's :class:`~agentflow.models.base.Model`.

Routes: ``GET /v1/models``, ``GET /v1/models/{id}``, ``POST /v1/chat/completions``
(tools, ``tool_choice``, ``response_format``, SSE streaming) and ``GET /health``.
Backed by :class:`EmbeddedModel`, every tool call and structured answer is
constrained by the action schema, so it validates by construction. Requests are
served concurrently (the engine batches them); ``max_concurrency`` caps how many
steps run at once.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentflow.engine.errors import ContextLengthError, SchemaError
from agentflow.models.base import Model, StepDelta, StepResponse, StepUsage

from .convert import Prepared, final_content, prepare, tool_calls_out
from .errors import APIError, bad_request, model_not_found
from .schemas import ChatCompletionRequest
from .streaming import ChunkWriter, aclose_quietly, sse

logger = logging.getLogger(__name__)


def _api_error(exc: Exception) -> APIError:
    """The HTTP answer for an exception raised while the model works."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, SchemaError):
        return APIError(400, f"unsupported schema: {exc}", code="unsupported_schema")
    if isinstance(exc, ContextLengthError):
        return APIError(400, str(exc), param="messages", code="context_length_exceeded")
    logger.exception("model step failed")
    return APIError(500, f"the model failed: {type(exc).__name__}: {exc}", type="server_error")


def _usage(usage: StepUsage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
    }


def _engine_stats(usage: StepUsage) -> dict[str, Any]:
    return {
        "forward_passes": usage.forward_passes,
        "forced_tokens": usage.forced_tokens,
        "seconds": round(usage.seconds, 6),
        "mode": usage.mode,
        "reason": usage.reason,
    }


def _validation_message(exc: ValidationError) -> tuple[str, str | None]:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    return f"invalid request: {loc}: {first['msg']}", loc or None


class OpenAIServer:
    """The request handlers; one instance per app, holding the served models."""

    def __init__(self, models: Mapping[str, Model], *, max_concurrency: int | None = None) -> None:
        if not models:
            raise ValueError("the server needs at least one model")
        self.models = dict(models)
        self.created = int(time.time())
        self.limiter = anyio.CapacityLimiter(max_concurrency) if max_concurrency else None

    def _model(self, name: str) -> Model:
        model = self.models.get(name)
        if model is None:
            raise model_not_found(name, sorted(self.models))
        return model

    def _model_card(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": self.created, "owned_by": "agentflow"}

    async def list_models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [self._model_card(n) for n in self.models]})

    async def get_model(self, request: Request) -> Response:
        name = request.path_params["model"]
        try:
            self._model(name)
        except APIError as exc:
            return exc.response()
        return JSONResponse(self._model_card(name))

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "models": sorted(self.models)})

    async def _parse(self, request: Request) -> tuple[ChatCompletionRequest, Prepared]:
        try:
            payload = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise bad_request(f"the request body is not valid JSON: {exc}") from exc
        if not isinstance(payload, dict):
            raise bad_request("the request body must be a JSON object")
        try:
            req = ChatCompletionRequest.model_validate(payload)
        except ValidationError as exc:
            message, param = _validation_message(exc)
            raise bad_request(message, param=param) from exc
        self._model(req.model)
        return req, prepare(req)

    async def chat_completions(self, request: Request) -> Response:
        try:
            req, prepared = await self._parse(request)
        except APIError as exc:
            return exc.response()
        model = self._model(req.model)
        if prepared.stream:
            return await self._stream(model, req.model, prepared)
        try:
            if self.limiter is not None:
                async with self.limiter:
                    result = await model.step(prepared.step)
            else:
                result = await model.step(prepared.step)
        except Exception as exc:
            return _api_error(exc).response()
        return JSONResponse(self._completion(req.model, prepared, result))

    def _completion(self, name: str, prepared: Prepared, result: StepResponse) -> dict[str, Any]:
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        action = result.action
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        if action.is_final:
            message["content"] = final_content(action, structured=prepared.structured)
            finish = "stop"
        else:
            message["tool_calls"] = tool_calls_out(action, completion_id[-8:])
            finish = "tool_calls"
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": name,
            "system_fingerprint": None,
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
            "usage": _usage(result.usage),
            "agentflow": _engine_stats(result.usage),
        }

    async def _stream(self, model: Model, name: str, prepared: Prepared) -> Response:
        writer = ChunkWriter(f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), name)
        return StepStreamResponse(self, model, prepared, writer)

    async def events(
        self,
        iterator: AsyncIterator[StepDelta | StepResponse],
        first: StepDelta | StepResponse,
        writer: ChunkWriter,
        prepared: Prepared,
    ) -> AsyncIterator[str]:
        """The SSE events of a streamed step whose first item is ``first``."""
        try:
            yield writer.role()
            item: StepDelta | StepResponse | None = first
            result: StepResponse | None = None
            while item is not None:
                if isinstance(item, StepResponse):
                    result = item
                    break
                if not prepared.structured:
                    event = writer.draft(item.text)
                    if event is not None:
                        yield event
                item = await anext(iterator, None)
            if result is None:
                raise RuntimeError("the model's stream ended without a step response")
            action = result.action
            if action.is_final:
                for event in writer.finish_text(
                    final_content(action, structured=prepared.structured)
                ):
                    yield event
            else:
                for event in writer.finish_tool_calls(
                    tool_calls_out(action, writer.completion_id[-8:])
                ):
                    yield event
            if prepared.include_usage:
                yield writer.usage(_usage(result.usage))
            yield sse("[DONE]")
        except Exception as exc:
            yield sse(_api_error(exc).body())


class StepStreamResponse(Response):
    """Streams one step as SSE, consuming the model's stream in a single task.

    A model's ``stream_step`` may hold a task group across its yields (the
    embedded model does), so it must be started, iterated and closed by one task;
    starlette's ``StreamingResponse`` would iterate it in another task than the
    one that pulled the first item. The first item is pulled before the headers
    go out, so request-level failures (a schema the engine cannot enforce, a
    prompt too long) still get their HTTP status.
    """

    media_type = "text/event-stream"

    def __init__(
        self, server: OpenAIServer, model: Model, prepared: Prepared, writer: ChunkWriter
    ) -> None:
        super().__init__(media_type=self.media_type)
        self.server = server
        self.model = model
        self.prepared = prepared
        self.writer = writer

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        limit = self.server.limiter
        if limit is None:
            await self._run(scope, receive, send)
        else:
            async with limit:
                await self._run(scope, receive, send)

    async def _run(self, scope: Any, receive: Any, send: Any) -> None:
        iterator = aiter(self.model.stream_step(self.prepared.step))
        try:
            try:
                first = await anext(iterator)
            except Exception as exc:
                await _api_error(exc).response()(scope, receive, send)
                return
            headers = [
                (b"content-type", b"text/event-stream; charset=utf-8"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            events = self.server.events(iterator, first, self.writer, self.prepared)
            async for event in events:
                await send(
                    {"type": "http.response.body", "body": event.encode(), "more_body": True}
                )
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await aclose_quietly(iterator)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
    return APIError(exc.status_code, str(exc.detail), type=kind).response()


def create_app(
    models: Model | Sequence[Model] | Mapping[str, Model],
    *,
    max_concurrency: int | None = None,
) -> Starlette:
    """A starlette app serving ``models`` (by their ``name``, or by the mapping's keys)."""
    if isinstance(models, Mapping):
        table = dict(models)
    elif isinstance(models, Sequence):
        table = {m.name: m for m in models}
    else:
        table = {models.name: models}
    server = OpenAIServer(table, max_concurrency=max_concurrency)
    routes = [
        Route("/v1/models", server.list_models, methods=["GET"]),
        Route("/v1/models/{model:path}", server.get_model, methods=["GET"]),
        Route("/v1/chat/completions", server.chat_completions, methods=["POST"]),
        Route("/health", server.health, methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.state.server = server
    return app
