"""Agent runs with and without the prompt cache (:mod:`agentflow.engine.prefix_store`).

    python benchmarks/prompt_cache.py [--runs 12] [--threads 2]

The customer-support example agent (``examples/customer_support.py``) answers a
list of order questions in ``auto`` mode (the packaged pair, as ``make demo``
does): each run takes a tool-call step and an answer step. Two copies of the
embedded model serve it side by side in one process, one with
``HybridOptions(prompt_cache=8)`` (the default: each model keeps its recent
prompts' keys and values) and one with ``prompt_cache=0`` (every prompt read
whole), alternating request by request so that both see the same machine. Both
must give the same answers. Prints the median and total seconds per run for
each, the paired ratio, and the prompt tokens each model read from the store;
writes ``benchmarks/results/prompt_cache.json``. The first run of each copy
(loading, first-use costs) is reported apart.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import torch

from agentflow.cli.demo import load_example
from agentflow.engine.hybrid_options import HybridOptions
from agentflow.models.embedded import EmbeddedModel

QUESTIONS = [
    "Where is my order {n}?",
    "What is the status of order {n}?",
    "Can you check order {n} for me?",
    "hi, has order {n} shipped yet?",
]
ORDERS = ["58213", "58214"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prompt_cache", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12, help="agent runs per arm after the first")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    example = load_example()
    messages = [
        QUESTIONS[i % len(QUESTIONS)].format(n=ORDERS[(i // len(QUESTIONS)) % len(ORDERS)])
        for i in range(args.runs + 1)
    ]
    arms = {"cache": 8, "no cache": 0}
    times: dict[str, list[float]] = {a: [] for a in arms}
    answers: dict[str, list[str]] = {a: [] for a in arms}
    with tempfile.TemporaryDirectory(prefix="agentflow-bench-") as tmp:
        models = {
            a: EmbeddedModel(hybrid_options=HybridOptions(prompt_cache=k)) for a, k in arms.items()
        }
        agents = {}
        for arm, model in models.items():
            agents[arm] = example.build_agent(Path(tmp) / f"{arm}.db", model=model)
            agents[arm].mode = "auto"
        for i, message in enumerate(messages):
            order = list(arms) if i % 2 == 0 else list(reversed(arms))
            for arm in order:
                t0 = time.perf_counter()
                result = anyio.run(lambda a=agents[arm], m=message: a.run(m))
                times[arm].append(time.perf_counter() - t0)
                answers[arm].append(str(result.output))
    same = answers["cache"] == answers["no cache"]
    reused: dict[str, Any] = {}
    for arm, model in models.items():
        engine = model._engines.get("auto")
        reused[arm] = {
            "drafter": engine.drafter_prompts.reused_tokens if engine.drafter_prompts else 0,
            "verifier": engine.verifier_prompts.reused_tokens if engine.verifier_prompts else 0,
        }
    warm = {a: t[1:] for a, t in times.items()}
    ratios = [c / n for c, n in zip(warm["cache"], warm["no cache"], strict=True)]
    rows = {
        arm: {
            "first_run_s": times[arm][0],
            "median_run_s": statistics.median(warm[arm]),
            "total_s": sum(warm[arm]),
            "reused_prompt_tokens": reused[arm],
        }
        for arm in arms
    }
    print(
        f"{args.runs} agent runs per arm (two steps each, auto mode) after a first run; {args.threads} threads"
    )
    print(
        f"{'arm':<10}{'first run s':>13}{'median run s':>14}{'total s':>9}  prompt tokens read from the store"
    )
    for arm, r in rows.items():
        print(
            f"{arm:<10}{r['first_run_s']:>13.3f}{r['median_run_s']:>14.3f}{r['total_s']:>9.2f}"
            f"  drafter {r['reused_prompt_tokens']['drafter']}, verifier {r['reused_prompt_tokens']['verifier']}"
        )
    print(f"paired ratio cache / no cache, median over runs: {statistics.median(ratios):.3f}")
    print(f"same answers: {same}")
    out = args.json or Path(__file__).resolve().parent / "results" / "prompt_cache.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "runs": args.runs,
        "threads": args.threads,
        "arms": rows,
        "paired_ratio_median": statistics.median(ratios),
        "same_answers": same,
        "answers": answers["cache"],
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
