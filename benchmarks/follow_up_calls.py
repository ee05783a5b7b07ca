"""What follow-up calls and dropping redundant calls fix and cost: ``EmbeddedModel``
steps with them (the default) and without.

Where an action's calls leave a part of the request with values untouched
("send me invoice INV-1. downgrade cus_457"), ``EmbeddedModel`` decodes that part
as a request of its own and adds its calls; then it drops the calls after the
first that take no new value from the conversation
(``agentflow.engine.call_coverage``). This runs the first step of held-out
conversations that need calls (single and parallel requests of ``agentflow
eval``'s held-out set) one at a time, as one agent would, with
``follow_up_calls`` and ``drop_redundant_calls`` on and off, side by side in one
run:

- tool choice (the calls' names, in any order, as ``agentflow eval`` scores it)
  per kind of request, each way;
- how many steps decoded a follow-up, how many kept it, and how many dropped
  redundant calls;
- seconds and forward passes per step, each way, over all steps and over the
  steps that decoded a follow-up (their cost is the second decode).

    python benchmarks/follow_up_calls.py [--cases 384] [--seed 777] [--mode diffusion]

Writes ``benchmarks/results/follow_up_calls.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

from agentflow.engine.constraints import action_schema
from agentflow.engine.training.evaluate import eval_cases
from agentflow.models import EmbeddedModel, StepRequest
from agentflow.models._step_decoding import FOLLOW_UP, REDUNDANT


def requests(n: int, seed: int) -> list[tuple[str, list[str], StepRequest]]:
    """(kind, the right calls' names, the step) of the held-out cases among the first
    ``n`` whose last message is a request that needs calls."""
    out = []
    for sample in eval_cases(n, seed):
        if sample.kind not in ("call", "parallel") or sample.messages[-1].role != "user":
            continue
        step = StepRequest(
            messages=list(sample.messages),
            tools=list(sample.tools),
            action_schema=action_schema(list(sample.tools), None, parallel_calls=True),
            instructions=sample.instructions,
        )
        out.append((sample.kind, [name for name, _ in sample.calls], step))
    return out


def one_step(model: EmbeddedModel, kind: str, want: list[str], step: StepRequest) -> dict[str, Any]:
    """One step through ``model``: its seconds, passes and what it did."""
    start = time.perf_counter()
    response = anyio.run(model.step, step)
    seconds = time.perf_counter() - start
    names = [c.name for c in response.action.tool_calls]
    reason = response.usage.reason
    return {
        "kind": kind,
        "right": Counter(names) == Counter(want),  # as agentflow eval scores it
        "seconds": seconds,
        "forward_passes": response.usage.forward_passes,
        "follow_up": FOLLOW_UP in reason,
        "kept": FOLLOW_UP in reason and "(dropped" not in reason,
        "redundant": REDUNDANT in reason,
    }


def run(
    off: EmbeddedModel, on: EmbeddedModel, steps: list[tuple[str, list[str], StepRequest]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each step through both models (after one warm-up step each), in turns: the
    model that goes first alternates, so neither gets the caches warmed by the
    other more often (the automaton store and the OS page cache are shared)."""
    for model in (off, on):
        anyio.run(model.step, steps[0][2])
    rows_off, rows_on = [], []
    for i, (kind, want, step) in enumerate(steps):
        if i % 2:
            rows_on.append(one_step(on, kind, want, step))
            rows_off.append(one_step(off, kind, want, step))
        else:
            rows_off.append(one_step(off, kind, want, step))
            rows_on.append(one_step(on, kind, want, step))
    return rows_off, rows_on


def mean(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.fmean(float(r[key]) for r in rows) if rows else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=384)
    parser.add_argument("--seed", type=int, default=777)
    parser.add_argument("--mode", default="diffusion", choices=["diffusion", "ar", "auto"])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "follow_up_calls.json"
    )
    args = parser.parse_args(argv)

    steps = requests(args.cases, args.seed)
    off, on = run(
        EmbeddedModel(mode=args.mode, follow_up_calls=False, drop_redundant_calls=False),
        EmbeddedModel(mode=args.mode, follow_up_calls=True, drop_redundant_calls=True),
        steps,
    )
    decoded = [i for i, r in enumerate(on) if r["follow_up"]]
    kept = sum(r["kept"] for r in on)
    pruned = sum(r["redundant"] for r in on)

    print(
        f"{len(steps)} held-out steps (seed {args.seed}, {args.mode}); follow-ups decoded in "
        f"{len(decoded)}, kept in {kept}; redundant calls dropped in {pruned}"
    )
    print(
        f"{'requests':<10} {'steps':>5}  {'tool choice off':>15}  {'on':>6}  {'fixed':>5}  {'broken':>6}"
    )
    summary: dict[str, Any] = {}
    for kind in ("call", "parallel"):
        idx = [i for i, r in enumerate(off) if r["kind"] == kind]
        right_off = sum(off[i]["right"] for i in idx)
        right_on = sum(on[i]["right"] for i in idx)
        fixed = sum(on[i]["right"] and not off[i]["right"] for i in idx)
        broken = sum(off[i]["right"] and not on[i]["right"] for i in idx)
        summary[kind] = {
            "steps": len(idx),
            "right_off": right_off,
            "right_on": right_on,
            "fixed": fixed,
            "broken": broken,
        }
        print(
            f"{kind:<10} {len(idx):>5}  {100 * right_off / len(idx):>14.1f}%  "
            f"{100 * right_on / len(idx):>5.1f}%  {fixed:>5}  {broken:>6}"
        )
    cost = {}
    for label, idx in (("all steps", range(len(steps))), ("steps with a follow-up", decoded)):
        a = [off[i] for i in idx]
        b = [on[i] for i in idx]
        cost[label] = {
            "steps": len(a),
            "ms_off": 1000 * mean(a, "seconds"),
            "ms_on": 1000 * mean(b, "seconds"),
            "passes_off": mean(a, "forward_passes"),
            "passes_on": mean(b, "forward_passes"),
        }
        c = cost[label]
        print(
            f"{label}: {c['ms_off']:.1f} → {c['ms_on']:.1f} ms per step "
            f"(× {c['ms_on'] / c['ms_off']:.2f}), {c['passes_off']:.1f} → {c['passes_on']:.1f} forward passes"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "seed": args.seed,
                "cases": args.cases,
                "mode": args.mode,
                "follow_ups_decoded": len(decoded),
                "follow_ups_kept": kept,
                "redundant_calls_dropped": pruned,
                "tool_choice": summary,
                "cost": cost,
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
