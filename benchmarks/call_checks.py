"""What the checks on an action's calls fix and cost: ``EmbeddedModel`` steps with
them (the default) and without.

``EmbeddedModel`` decodes a message holding several requests one request at a
time, in one batch, and joins their calls (``split_requests``,
``agentflow.engine.request_parts``). After decoding, it checks an action's calls against the request's
values (``agentflow.engine.call_coverage``, ``agentflow.engine.near_copies``):
it decodes the part of the request the calls left untouched as a request of its
own and adds its calls (``follow_up_calls``), drops the calls after the first
that take no new value from the conversation (``drop_redundant_calls``), and
puts back the request's values a call wrote almost right
(``restore_near_copies``) and drops optional arguments whose values nobody gave
(``drop_made_up_options``). This runs the first step of held-out conversations
that need calls (single and parallel requests of ``agentflow eval``'s held-out
set) one at a time, as one agent would, with the checks on and off, each
step through both in alternating order:

- tool choice and exact arguments (scored as ``agentflow eval`` scores them) per
  kind of request, each way, with the steps fixed and broken;
- how many steps were split (and joined), decoded a follow-up, kept it, dropped
  calls, restored values;
- seconds and forward passes per step, each way, over all steps, over the steps
  that were split (their cost is a row per request) and over those that decoded
  a follow-up (their cost is the second decode).

    python benchmarks/call_checks.py [--cases 384] [--seed 777] [--mode diffusion]

Writes ``benchmarks/results/call_checks.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from agentflow.engine.action_mending import MADE_UP, REDUNDANT, RESTORED
from agentflow.engine.constraints import action_schema
from agentflow.engine.training.corpus import Sample
from agentflow.engine.training.evaluate import eval_cases, score
from agentflow.models import EmbeddedModel, StepRequest
from agentflow.models._step_decoding import FOLLOW_UP, NOT_JOINED, SPLIT

CHECKS = (
    "split_requests",
    "follow_up_calls",
    "drop_redundant_calls",
    "restore_near_copies",
    "drop_made_up_options",
)
METRICS = ("tool_choice", "exact_args")


def requests(n: int, seed: int) -> list[tuple[Sample, StepRequest]]:
    """The held-out cases among the first ``n`` whose last message is a request
    that needs calls, each with its step."""
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
        out.append((sample, step))
    return out


def timed_step(model: EmbeddedModel, sample: Sample, step: StepRequest) -> dict[str, Any]:
    """One step through ``model``: its seconds, passes, scores and usage reason."""
    start = time.perf_counter()
    response = anyio.run(model.step, step)
    seconds = time.perf_counter() - start
    scores = score(sample, response.text, step.action_schema)
    return {
        "kind": sample.kind,
        **{m: bool(scores[m]) for m in METRICS},
        "seconds": seconds,
        "forward_passes": response.usage.forward_passes,
        "reason": response.usage.reason,
    }


def one_step(model: EmbeddedModel, sample: Sample, step: StepRequest) -> dict[str, Any]:
    """One step through ``model``: its seconds, passes, scores and what it did."""
    row = timed_step(model, sample, step)
    reason = row.pop("reason")
    return {
        **row,
        "split": SPLIT in reason,
        "joined": SPLIT in reason and NOT_JOINED not in reason,
        "follow_up": FOLLOW_UP in reason,
        "kept": FOLLOW_UP in reason and "(dropped" not in reason,
        "redundant": REDUNDANT in reason,
        "restored": RESTORED in reason,
        "made_up": MADE_UP in reason,
    }


def run(
    off: EmbeddedModel, on: EmbeddedModel, steps: list[tuple[Sample, StepRequest]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each step through both models (after one warm-up step each), in turns: the
    model that goes first alternates, so neither gets the caches warmed by the
    other more often (the automaton store and the OS page cache are shared)."""
    for model in (off, on):
        anyio.run(model.step, steps[0][1])
    return alternating(
        len(steps),
        lambda i: one_step(off, *steps[i]),
        lambda i: one_step(on, *steps[i]),
    )


def alternating(
    n: int, off: Callable[[int], dict[str, Any]], on: Callable[[int], dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows ``off(i)`` and ``on(i)`` for each of ``n`` steps, the one that runs first
    alternating from step to step."""
    rows_off, rows_on = [], []
    for i in range(n):
        if i % 2:
            rows_on.append(on(i))
            rows_off.append(off(i))
        else:
            rows_off.append(off(i))
            rows_on.append(on(i))
    return rows_off, rows_on


def mean(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.fmean(float(r[key]) for r in rows) if rows else float("nan")


def scores(off: list[dict[str, Any]], on: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind of request and metric: steps, right each way, fixed and broken."""
    out: dict[str, Any] = {}
    print(f"{'requests':<10} {'metric':<12} {'steps':>5}  {'off':>6}  {'on':>6}  fixed  broken")
    for kind in ("call", "parallel"):
        idx = [i for i, r in enumerate(off) if r["kind"] == kind]
        if not idx:
            continue
        for metric in METRICS:
            row = {
                "steps": len(idx),
                "off": sum(off[i][metric] for i in idx),
                "on": sum(on[i][metric] for i in idx),
                "fixed": sum(on[i][metric] and not off[i][metric] for i in idx),
                "broken": sum(off[i][metric] and not on[i][metric] for i in idx),
            }
            out[f"{kind} {metric}"] = row
            print(
                f"{kind:<10} {metric:<12} {len(idx):>5}  {100 * row['off'] / len(idx):>5.1f}%  "
                f"{100 * row['on'] / len(idx):>5.1f}%  {row['fixed']:>5}  {row['broken']:>6}"
            )
    return out


def cost(off: list[dict[str, Any]], on: list[dict[str, Any]]) -> dict[str, Any]:
    """Milliseconds and forward passes per step, each way: over all steps, the steps
    that were split and those that decoded a follow-up."""
    return timed(
        off,
        on,
        {
            "all steps": list(range(len(on))),
            "split": [i for i, r in enumerate(on) if r["split"]],
            "with a follow-up": [i for i, r in enumerate(on) if r["follow_up"]],
        },
    )


def timed(
    off: list[dict[str, Any]], on: list[dict[str, Any]], groups: dict[str, list[int]]
) -> dict[str, Any]:
    """Milliseconds and forward passes per step, each way, over each group of steps
    (by index; an empty group is left out); printed a line a group."""
    out = {}
    for label, idx in groups.items():
        if not idx:
            continue
        a, b = [off[i] for i in idx], [on[i] for i in idx]
        c = {
            "steps": len(idx),
            "ms_off": 1000 * mean(a, "seconds"),
            "ms_on": 1000 * mean(b, "seconds"),
            "passes_off": mean(a, "forward_passes"),
            "passes_on": mean(b, "forward_passes"),
        }
        out[label] = c
        print(
            f"{label}: {c['ms_off']:.1f} → {c['ms_on']:.1f} ms per step "
            f"(× {c['ms_on'] / c['ms_off']:.2f}), {c['passes_off']:.1f} → "
            f"{c['passes_on']:.1f} forward passes"
        )
    return out


def step_options(parser: argparse.ArgumentParser, report: str, modes: list[str]) -> None:
    """The options of a step-by-step comparison: the held-out cases, their seed, the
    mode (one of ``modes``) and the report's path (``results/<report>.json``)."""
    parser.add_argument("--cases", type=int, default=384)
    parser.add_argument("--seed", type=int, default=777)
    parser.add_argument("--mode", default="diffusion", choices=modes)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / f"{report}.json"
    )


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write ``report`` as JSON at ``path`` (its folder made) and say so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    step_options(parser, "call_checks", ["diffusion", "ar", "auto"])
    args = parser.parse_args(argv)

    steps = requests(args.cases, args.seed)
    off, on = run(
        EmbeddedModel(mode=args.mode, **dict.fromkeys(CHECKS, False)),
        EmbeddedModel(mode=args.mode, **dict.fromkeys(CHECKS, True)),
        steps,
    )
    counts = {
        k: sum(r[k] for r in on)
        for k in ("split", "joined", "follow_up", "kept", "redundant", "restored", "made_up")
    }
    print(
        f"{len(steps)} held-out steps (seed {args.seed}, {args.mode}); split in "
        f"{counts['split']} (joined in {counts['joined']}); follow-ups decoded in "
        f"{counts['follow_up']}, kept in {counts['kept']}; redundant calls dropped in "
        f"{counts['redundant']}; near copies restored in {counts['restored']}; made-up "
        f"options dropped in {counts['made_up']}"
    )
    report = {
        "machine": platform.platform(),
        "seed": args.seed,
        "cases": args.cases,
        "mode": args.mode,
        "steps": len(steps),
        **counts,
        "scores": scores(off, on),
        "cost": cost(off, on),
    }
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
