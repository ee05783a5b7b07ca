"""``OpenAIModel``: any OpenAI-compatible ``chat.completions`` endpoint, over httpx.

One step is one ``POST {base_url}/chat/completions``: the tools go out as
function definitions, a structured final output as ``response_format``
``json_schema``, and the reply's ``tool_calls`` / ``content`` come back as an
:class:`~agentflow.models.base.Action`. Failures are specific exceptions:

- :class:`ModelHTTPError` — a non-2xx status (``status``, ``body``, ``message``);
  429 and 5xx are retried first, with exponential backoff and jitter, honouring
  ``Retry-After``;
- :class:`ModelTimeoutError` — the request timed out on every attempt;
- :class:`ModelConnectionError` — the endpoint could not be reached;
- :class:`ModelResponseError` — a 2xx reply that is not a usable completion.

The remote model is not constrained the way the embedded one is: it may name an
unknown tool or send arguments that do not validate. Those reach the runtime as
they are, which validates them and feeds the error back to the model.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
import httpx

from .base import StepDelta, StepRequest, StepResponse, StepUsage
from .openai_wire import (
    ModelResponseError,
    StreamAccumulator,
    WireOptions,
    action_from_message,
    action_text,
    build_body,
    parse_completion,
)

__all__ = [
    "ModelConnectionError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelTimeoutError",
    "OpenAIModel",
    "RetryPolicy",
]

Sleep = Callable[[float], Awaitable[None]]


class ModelHTTPError(Exception):
    """The endpoint answered with a non-2xx status (after retries, for retryable ones)."""

    def __init__(self, status: int, body: str, *, attempts: int = 1) -> None:
        self.status = status
        self.body = body
        self.attempts = attempts
        self.message = _error_message(body)
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        super().__init__(f"HTTP {status}{tries}: {self.message}")


class ModelTimeoutError(Exception):
    """Every attempt timed out."""


class ModelConnectionError(Exception):
    """The endpoint could not be reached on any attempt."""


def _error_message(body: str) -> str:
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, TypeError):
        return body[:500] or "(empty body)"
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return body[:500]


@dataclass(frozen=True)
class RetryPolicy:
    """Retries on 429/5xx, timeouts and connection errors.

    The n-th retry waits ``min(max_delay, initial_delay * multiplier**n)`` scaled
    by a random factor in ``[1 - jitter, 1]``; a ``Retry-After`` header, when
    present, is used instead (capped at ``max_retry_after``).
    """

    max_retries: int = 3
    initial_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 20.0
    jitter: float = 0.5
    max_retry_after: float = 60.0
    retry_statuses: frozenset[int] = frozenset({408, 409, 429, 500, 502, 503, 504})

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.initial_delay < 0 or self.max_delay < 0:
            raise ValueError("retry delays must be >= 0")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter must be in [0, 1], got {self.jitter}")

    def should_retry(self, status: int) -> bool:
        return status in self.retry_statuses or status >= 500

    def delay(self, retry: int, rng: random.Random, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        base = min(self.max_delay, self.initial_delay * self.multiplier**retry)
        return base * (1.0 - self.jitter * rng.random())


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date); None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


class OpenAIModel:
    """A :class:`~agentflow.models.base.Model` backed by an OpenAI-compatible endpoint.

    ``api_key`` defaults to ``$OPENAI_API_KEY`` and ``base_url`` to ``$OPENAI_BASE_URL``
    or ``https://api.openai.com/v1``. Pass ``http_client`` to share a client (the
    model then does not close it) or ``transport`` to plug in e.g. a mock.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 60.0,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        strict_output: bool = True,
        extra_body: Mapping[str, Any] | None = None,
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = anyio.sleep,
        seed: int | None = None,
    ) -> None:
        if not model:
            raise ValueError("OpenAIModel needs a model name")
        self._model = model
        self.base_url = (
            base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        ).rstrip("/")
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._headers = {"Accept": "application/json", **(headers or {})}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self.timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.retry = retry or RetryPolicy()
        self._options = WireOptions(
            model=model, strict_output=strict_output, extra_body=dict(extra_body or {})
        )
        self._client = http_client
        self._owns_client = http_client is None
        self._client_token: object = None
        self._transport = transport
        self._sleep = sleep
        self._rng = random.Random(seed)

    @property
    def name(self) -> str:
        return self._model

    def _http(self) -> httpx.AsyncClient:
        # A pooled connection belongs to the event loop that opened it: an owned client
        # is replaced when the model is used from another loop (e.g. two run_sync calls).
        token = anyio.lowlevel.current_token()
        if self._client is not None and self._owns_client and self._client_token is not token:
            self._client = None
        if self._client is None:
            self._client = httpx.AsyncClient(transport=self._transport, timeout=self.timeout)
            self._client_token = token
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client if this model created it."""
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @asynccontextmanager
    async def _send(self, body: dict[str, Any], *, stream: bool) -> AsyncIterator[httpx.Response]:
        """Open a 2xx response, retrying per :attr:`retry`; the response stays open inside."""
        url = f"{self.base_url}/chat/completions"
        attempts = self.retry.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            request = self._http().build_request(
                "POST", url, json=body, headers=self._headers, timeout=self.timeout
            )
            try:
                response = await self._http().send(request, stream=True)
            except httpx.TimeoutException as exc:
                if last:
                    raise ModelTimeoutError(
                        f"{url} timed out on all {attempts} attempts ({type(exc).__name__})"
                    ) from exc
                await self._sleep(self.retry.delay(attempt, self._rng))
                continue
            except httpx.TransportError as exc:
                if last:
                    raise ModelConnectionError(
                        f"cannot reach {url} after {attempts} attempts: {exc}"
                    ) from exc
                await self._sleep(self.retry.delay(attempt, self._rng))
                continue
            try:
                if response.status_code >= 300:
                    text = (await response.aread()).decode("utf-8", "replace")
                    if last or not self.retry.should_retry(response.status_code):
                        raise ModelHTTPError(response.status_code, text, attempts=attempt + 1)
                    wait = self.retry.delay(
                        attempt, self._rng, parse_retry_after(response.headers.get("retry-after"))
                    )
                    await response.aclose()
                    await self._sleep(wait)
                    continue
                if not stream:
                    await response.aread()
                yield response
                return
            finally:
                await response.aclose()

    def _usage(self, usage: Mapping[str, Any], started: float, model: str) -> StepUsage:
        def count(key: str) -> int:
            value = usage.get(key)
            return value if isinstance(value, int) else 0

        return StepUsage(
            input_tokens=count("prompt_tokens"),
            output_tokens=count("completion_tokens"),
            seconds=time.perf_counter() - started,
            mode="remote",
            model=model or self._model,
        )

    async def step(self, request: StepRequest) -> StepResponse:
        """One step: a non-streamed completion turned into an action."""
        started = time.perf_counter()
        body = build_body(request, self._options, stream=False)
        try:
            async with self._send(body, stream=False) as response:
                data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelResponseError(f"the reply is not JSON: {exc}") from exc
        action, usage = parse_completion(data, output_schema=request.output_schema)
        model = str(data.get("model") or "")
        return StepResponse(
            action=action, text=action_text(action), usage=self._usage(usage, started, model)
        )

    async def stream_step(self, request: StepRequest) -> AsyncIterator[StepDelta | StepResponse]:
        """Stream a step over SSE: a :class:`StepDelta` per chunk, the :class:`StepResponse` last."""
        started = time.perf_counter()
        body = build_body(request, self._options, stream=True)
        acc = StreamAccumulator()
        done = False
        try:
            async with self._send(body, stream=True) as response:
                async for data in _sse_data(response):
                    if data == "[DONE]":
                        done = True
                        break
                    try:
                        chunk = json.loads(data)
                    except json.JSONDecodeError as exc:
                        raise ModelResponseError(
                            f"stream event is not JSON: {data[:200]!r}", body=data
                        ) from exc
                    before = acc.draft()
                    acc.add(chunk)
                    draft = acc.draft()
                    if draft != before:
                        yield StepDelta(text=draft)
        except httpx.TimeoutException as exc:
            raise ModelTimeoutError(f"the stream timed out ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise ModelConnectionError(f"the stream broke off: {exc}") from exc
        if not done and acc.finish_reason is None:
            raise ModelResponseError("the stream ended before a finish_reason or [DONE]")
        action = action_from_message(
            acc.message(), output_schema=request.output_schema, finish_reason=acc.finish_reason
        )
        yield StepResponse(
            action=action,
            text=action_text(action),
            usage=self._usage(acc.usage, started, acc.model),
        )


async def _sse_data(response: httpx.Response) -> AsyncIterator[str]:
    """The ``data`` payload of each server-sent event (multi-line data joined by newlines)."""
    lines: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if lines:
                yield "\n".join(lines)
                lines = []
            continue
        if line.startswith(":"):
            continue
        field_name, _, value = line.partition(":")
        if field_name == "data":
            lines.append(value[1:] if value.startswith(" ") else value)
    if lines:
        yield "\n".join(lines)
