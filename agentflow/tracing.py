"""Tracing: one JSON line per event to a file and/or a callback; OpenTelemetry spans when installed.

Spans: ``agentflow.run`` per run, ``agentflow.step`` per step (usage as attributes:
tokens, forward passes, seconds, decoding mode), ``agentflow.tool`` per tool call
(an error outcome sets the span status to error). Retries and handoffs are span
events. One :class:`Tracer` may serve many concurrent runs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from .events import (
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

EventCallback = Callable[[dict[str, Any]], None]


class Tracer:
    """Writes each event as a JSON line to ``path``, passes its dict to ``callback``, and mirrors
    runs as OpenTelemetry spans (``otel=None``: when ``opentelemetry`` is importable)."""

    def __init__(
        self,
        path: str | Path | None = None,
        callback: EventCallback | None = None,
        *,
        otel: bool | None = None,
        otel_tracer: Any = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.callback = callback
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._spans: _OTelSpans | None = None
        if otel_tracer is not None:
            self._spans = _OTelSpans(otel_tracer)
        elif otel is not False:
            try:
                from opentelemetry import trace
            except ImportError:
                if otel:
                    raise ImportError(
                        "Tracer(otel=True) needs opentelemetry: pip install 'agentflow[otel]'"
                    ) from None
            else:
                self._spans = _OTelSpans(trace.get_tracer("agentflow"))

    def emit(self, event: Event) -> None:
        """Record one event."""
        if self.path is not None or self.callback is not None:
            data = event.to_dict()
            if self.path is not None:
                line = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
                with self._lock:
                    if self._file is None:
                        self.path.parent.mkdir(parents=True, exist_ok=True)
                        self._file = self.path.open("a", encoding="utf-8")
                    self._file.write(line + "\n")
                    self._file.flush()
            if self.callback is not None:
                self.callback(data)
        if self._spans is not None:
            self._spans.on_event(event)

    def close(self) -> None:
        """Close the trace file."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> Tracer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _OTelSpans:
    """Maps the event stream of many runs onto OpenTelemetry spans."""

    def __init__(self, tracer: Any) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = tracer
        self._runs: dict[str, Any] = {}
        self._steps: dict[str, Any] = {}
        self._tools: dict[tuple[str, str], Any] = {}

    def _child(self, name: str, parent: Any, attributes: dict[str, Any]) -> Any:
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        return self._tracer.start_span(name, context=context, attributes=attributes)

    def _end_step(self, run_id: str) -> None:
        span = self._steps.pop(run_id, None)
        if span is not None:
            span.end()

    def on_event(self, event: Event) -> None:
        run = self._runs.get(event.run_id)
        if isinstance(event, RunStart):
            self._runs[event.run_id] = self._child(
                "agentflow.run",
                None,
                {
                    "agentflow.run_id": event.run_id,
                    "agentflow.agent": event.agent,
                    "agentflow.resumed": event.resumed,
                },
            )
        elif isinstance(event, StepStart):
            self._end_step(event.run_id)
            self._steps[event.run_id] = self._child(
                "agentflow.step",
                run,
                {"agentflow.step": event.step, "agentflow.agent": event.agent},
            )
        elif isinstance(event, StepEnd):
            span = self._steps.get(event.run_id)
            if span is not None:
                u = event.usage
                span.set_attributes(
                    {
                        "agentflow.input_tokens": u.input_tokens,
                        "agentflow.output_tokens": u.output_tokens,
                        "agentflow.forward_passes": u.forward_passes,
                        "agentflow.forced_tokens": u.forced_tokens,
                        "agentflow.model_seconds": u.seconds,
                        "agentflow.mode": u.mode,
                        "agentflow.model": u.model,
                    }
                )
        elif isinstance(event, ToolCallEvent):
            self._tools[(event.run_id, event.call_id)] = self._child(
                "agentflow.tool",
                self._steps.get(event.run_id, run),
                {"agentflow.tool": event.name, "agentflow.call_id": event.call_id},
            )
        elif isinstance(event, ToolResultEvent):
            span = self._tools.pop((event.run_id, event.call_id), None)
            if span is not None:
                if event.error is not None:
                    span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.error))
                span.end()
        elif isinstance(event, RetryEvent | HandoffEvent):
            target = self._steps.get(event.run_id, run)
            if target is not None:
                target.add_event(event.type, {k: str(v) for k, v in event.to_dict().items()})
        elif isinstance(event, FinalEvent | RunFailed):
            self._end_step(event.run_id)
            for key in [k for k in self._tools if k[0] == event.run_id]:
                self._tools.pop(key).end()
            span = self._runs.pop(event.run_id, None)
            if span is not None:
                if isinstance(event, RunFailed):
                    span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.error))
                span.end()
