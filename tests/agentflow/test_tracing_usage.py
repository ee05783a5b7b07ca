"""Tracing (one JSON line per event, callbacks, OpenTelemetry) and usage per step and per run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentflow import Agent, TestModel, Tracer, tool


@tool
def lookup(key: str) -> str:
    """Look up a key."""
    return key.upper()


@tool
def fail(key: str) -> str:
    """Always fails."""
    raise KeyError(key)


def test_jsonl_file_and_callback_get_one_record_per_event(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    path = tmp_path / "trace" / "run.jsonl"
    with Tracer(path, callback=seen.append, otel=False) as tracer:
        agent = Agent("a", tools=[lookup, fail], model=TestModel(), tracer=tracer)
        result = agent.run_sync("x")
        agent.run_sync("y")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == seen
    first_run = [rec for rec in lines if rec["run_id"] == result.run_id]
    assert [rec["type"] for rec in first_run] == [e.type for e in result.trace]
    assert len({rec["run_id"] for rec in lines}) == 2
    step_end = next(rec for rec in first_run if rec["type"] == "step_end")
    assert step_end["usage"]["mode"] == "test" and step_end["usage"]["output_tokens"] > 0
    errors = [rec["error"] for rec in first_run if rec["type"] == "tool_result" and rec["error"]]
    assert errors == ["KeyError: 'a'"]
    final = first_run[-1]
    assert final["type"] == "final" and "result" not in final


def test_run_usage_sums_the_steps() -> None:
    result = Agent("a", tools=[lookup], model=TestModel()).run_sync("x")
    steps = [s.usage for s in result.steps]
    usage = result.usage
    assert usage.steps == len(steps) == 2
    assert usage.input_tokens == sum(s.input_tokens for s in steps)
    assert usage.output_tokens == sum(s.output_tokens for s in steps)
    assert usage.model_seconds == pytest.approx(sum(s.seconds for s in steps))
    assert usage.tool_calls == 1 and usage.tool_seconds > 0
    assert usage.to_dict()["modes"] == {"test": 2}
    data = result.to_dict()
    assert json.loads(json.dumps(data))["usage"]["total_tokens"] == usage.total_tokens


def test_opentelemetry_spans_for_run_steps_and_tools() -> None:
    pytest.importorskip(
        "opentelemetry.sdk", reason="opentelemetry-sdk is not installed (extra [otel])"
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = Tracer(otel_tracer=provider.get_tracer("test"))
    Agent("a", tools=[lookup, fail], model=TestModel(), tracer=tracer).run_sync("x")
    spans = exporter.get_finished_spans()
    names = sorted(s.name for s in spans)
    assert names == [
        "agentflow.run",
        "agentflow.step",
        "agentflow.step",
        "agentflow.tool",
        "agentflow.tool",
    ]
    run = next(s for s in spans if s.name == "agentflow.run")
    assert all(s.context.trace_id == run.context.trace_id for s in spans)
    failed = [s for s in spans if s.name == "agentflow.tool" and not s.status.is_ok]
    assert [s.attributes["agentflow.tool"] for s in failed] == ["fail"]


def test_cached_input_tokens_add_up_and_survive_a_round_trip() -> None:
    from agentflow.models.base import StepUsage
    from agentflow.usage import RunUsage

    usage = RunUsage()
    usage.add_step(StepUsage(input_tokens=500, cached_input_tokens=0, mode="diffusion"))
    usage.add_step(StepUsage(input_tokens=600, cached_input_tokens=480, mode="diffusion"))
    other = RunUsage()
    other.add_step(StepUsage(input_tokens=50, cached_input_tokens=20))
    usage.add_run(other)
    assert usage.cached_input_tokens == 500 and usage.input_tokens == 1150
    assert RunUsage.from_dict(json.loads(json.dumps(usage.to_dict()))) == usage
