"""The run loop's own cost per step, and many concurrent runs, with ``TestModel``.

TestModel takes a few microseconds per step, so what is measured is the runtime:
building the request, events, validation, the tool phase and bookkeeping. Variants
side by side, one run: final answer only; one async tool; three parallel async
tools; one sync tool (worker thread); one async tool with a SQLite run store
(in memory; on disk through a worker thread, and inline); with a JSON-lines tracer. Then N concurrent runs (default
200), each of which must get back exactly its own data.

    python benchmarks/runtime_overhead.py [--runs 300] [--concurrent 200]

Writes ``benchmarks/results/runtime_overhead.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from agentflow import Agent, RunContext, RunStore, TestModel, Tracer, tool

TARGET_MS = 1.0


@tool
async def lookup(key: str) -> str:
    """Async no-op tool."""
    return key


@tool
async def lookup2(key: str) -> str:
    """Async no-op tool."""
    return key


@tool
async def lookup3(key: str) -> str:
    """Async no-op tool."""
    return key


@tool
def sync_lookup(key: str) -> str:
    """Sync no-op tool (runs in a worker thread)."""
    return key


@tool
async def whoami(ctx: RunContext[str]) -> str:
    """Returns the run's own deps after a short sleep (to interleave concurrent runs)."""
    await anyio.sleep(((hash(ctx.deps) % 5) + 1) / 1000)
    return ctx.deps


def variants(tmp: Path) -> dict[str, Callable[[], Agent[Any, Any]]]:
    model = TestModel()
    return {
        "final only": lambda: Agent("bench", model=model),
        "1 async tool": lambda: Agent("bench", tools=[lookup], model=model),
        "3 parallel tools": lambda: Agent("bench", tools=[lookup, lookup2, lookup3], model=model),
        "1 sync tool": lambda: Agent("bench", tools=[sync_lookup], model=model),
        "1 tool + store (memory)": lambda: Agent(
            "bench", tools=[lookup], model=model, store=RunStore(":memory:")
        ),
        "1 tool + store (disk)": lambda: Agent(
            "bench", tools=[lookup], model=model, store=RunStore(tmp / "runs.db")
        ),
        "1 tool + store (disk, inline)": lambda: Agent(
            "bench", tools=[lookup], model=model, store=RunStore(tmp / "inline.db", threaded=False)
        ),
        "1 tool + jsonl tracer": lambda: Agent(
            "bench", tools=[lookup], model=model, tracer=Tracer(tmp / "trace.jsonl", otel=False)
        ),
    }


async def measure(agent: Agent[Any, Any], runs: int) -> dict[str, float]:
    for _ in range(10):  # warm-up: schemas, caches, thread pool
        await agent.run("warm up")
    per_step: list[float] = []
    own: list[float] = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = await agent.run("hello")
        wall = time.perf_counter() - t0
        steps = result.usage.steps
        per_step.append(wall / steps)
        own.append((wall - result.usage.model_seconds) / steps)
    return {
        "ms_per_step_median": statistics.median(per_step) * 1e3,
        "ms_per_step_p90": statistics.quantiles(per_step, n=10)[-1] * 1e3,
        "loop_ms_per_step_median": statistics.median(own) * 1e3,
        "steps_per_run": float(steps),
    }


async def concurrent(n: int) -> dict[str, Any]:
    agent = Agent("echo", tools=[whoami], model=TestModel())
    results: dict[int, Any] = {}
    errors: list[str] = []

    async def one(i: int) -> None:
        try:
            results[i] = await agent.run(f"run {i}", deps=f"run-{i}")
        except Exception as exc:  # recorded, not fatal: the benchmark reports lost runs
            errors.append(f"{i}: {type(exc).__name__}: {exc}")

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    wall = time.perf_counter() - t0
    mixed = [i for i, r in results.items() if json.loads(r.output) != {"whoami": f"run-{i}"}]
    ids = {r.run_id for r in results.values()}
    return {
        "runs": n,
        "finished": len(results),
        "lost": n - len(results),
        "mixed_up": len(mixed),
        "errors": errors[:5],
        "distinct_run_ids": len(ids),
        "seconds": wall,
        "runs_per_second": n / wall,
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentflow-bench-") as tmp:
        rows = {}
        for name, make in variants(Path(tmp)).items():
            rows[name] = await measure(make(), args.runs)
    return {"variants": rows, "concurrent": await concurrent(args.concurrent)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="runs per variant")
    parser.add_argument("--concurrent", type=int, default=200, help="concurrent runs")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "runtime_overhead.json"
    )
    args = parser.parse_args()
    report = anyio.run(main_async, args)
    report["meta"] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "runs_per_variant": args.runs,
        "target_ms_per_step": TARGET_MS,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))

    base = report["variants"]["final only"]["loop_ms_per_step_median"]
    print(
        f"{'variant':<30}{'ms/step (median)':>18}{'p90':>9}{'loop only':>11}{'vs final-only':>15}{'< 1 ms':>8}"
    )
    for name, row in report["variants"].items():
        ok = "yes" if row["loop_ms_per_step_median"] < TARGET_MS else "NO"
        print(
            f"{name:<30}{row['ms_per_step_median']:>18.3f}{row['ms_per_step_p90']:>9.3f}"
            f"{row['loop_ms_per_step_median']:>11.3f}{row['loop_ms_per_step_median'] / base:>14.2f}x{ok:>8}"
        )
    c = report["concurrent"]
    print(
        f"\n{c['runs']} concurrent runs: {c['finished']} finished, {c['lost']} lost, "
        f"{c['mixed_up']} mixed up, {c['distinct_run_ids']} distinct run ids, "
        f"{c['seconds']:.2f}s ({c['runs_per_second']:.0f} runs/s)"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
