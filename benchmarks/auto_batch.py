"""``mode="auto"`` over a batch of agent steps: one batched diffusion attempt vs a row at a time.

    python benchmarks/auto_batch.py [--batch 8] [--batches 4] [--threads 2] [--mode auto]

``auto`` decodes each step by block diffusion and re-does the steps the drafter
was unsure of in hybrid mode. Its diffusion attempts run as one batch (one
forward pass serves every row); before 2026-12-07 they ran one row after
another. Held-out agent steps (``agentflow eval``'s cases, seed 777), set up as
``EmbeddedModel`` sets up a step (action constraint, canonical pairs, copy
choices, tool relevance, choice priors), are decoded by the shipped pair in
``auto`` mode as batches of ``--batch`` and one by one, alternating batch by
batch; the outputs must be equal. The prompt cache is off in both arms so that
neither reads prompts the other wrote. Prints seconds per batch for each, the
paired ratio and the share of steps re-done in hybrid mode; writes
``benchmarks/results/auto_batch.json``. ``--mode diffusion`` or ``ar`` times
those decoders the same way.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from agentflow.engine.autoregressive import ARDecoder
from agentflow.engine.chat_template import copy_sources, last_request
from agentflow.engine.checkpoints import load_checkpoint
from agentflow.engine.constraints import ConstraintCompiler
from agentflow.engine.constraints.enforcement import Constraint
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.hybrid import HybridEngine, HybridOptions
from agentflow.engine.tool_relevance import tool_bonuses
from agentflow.engine.training.evaluate import _action_schema, eval_cases
from agentflow.models.embedded import CANONICAL, COPY_WITHIN_TEXT, TEXT_THRESHOLD, TOOL_RELEVANCE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="auto_batch", description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--mode", choices=("auto", "diffusion", "ar"), default="auto", help="decoding mode"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    dlm, ar = load_checkpoint("agentflow-tiny-dlm"), load_checkpoint("agentflow-tiny-ar")
    tokenizer = dlm.tokenizer
    engine = HybridEngine(
        dlm.model,
        ar.model,
        tokenizer,
        verifier_tokenizer=ar.tokenizer,
        options=HybridOptions(prompt_cache=0),
    )
    ar_engine = ARDecoder(ar.model, ar.tokenizer, prompt_cache=0)
    config = GenerationConfig(
        max_new_tokens=192,
        block_length=dlm.config.block_length,
        score_choices=True,
        text_threshold=TEXT_THRESHOLD,
    )
    samples = eval_cases(args.batch * (args.batches + 1), seed=777)
    compiler = ConstraintCompiler()
    constraints = [
        Constraint(compiler.compile_schema(_action_schema(s), tokenizer).automaton, tokenizer)
        for s in samples
    ]

    def step(rows: range) -> tuple[list[list[int]], list[str]]:
        sessions = []
        for i in rows:
            session = constraints[i].session(config.max_new_tokens, canonical=CANONICAL)
            session.copy_from(copy_sources(samples[i].messages), within_text=COPY_WITHIN_TEXT)
            session.prefer(
                tool_bonuses(last_request(samples[i].messages), samples[i].tools, TOOL_RELEVANCE)
            )
            sessions.append(session)
        decoder: Any = ar_engine if args.mode == "ar" else engine
        res = decoder.generate(
            [samples[i].prompt() for i in rows],
            config,
            constraints=sessions,
            **({} if args.mode == "ar" else {"mode": args.mode}),
            choice_priors=[samples[i].choice_prior() for i in rows],
        )
        served = getattr(res.stats, "served", [])
        return res.sequences, [s.mode for s in served]

    step(range(args.batch))  # warm-up batch, not timed
    batched_s, alone_s, ratios, same, hybrid = [], [], [], True, 0
    for b in range(1, args.batches + 1):
        rows = range(b * args.batch, (b + 1) * args.batch)
        # Alternate which arm goes first: the first meets the constraints' memos cold.
        arms = ["batched", "alone"] if b % 2 else ["alone", "batched"]
        seconds: dict[str, float] = {}
        for arm in arms:
            t0 = time.perf_counter()
            if arm == "batched":
                together, served = step(rows)
            else:
                one_by_one = [step(range(i, i + 1))[0][0] for i in rows]
            seconds[arm] = time.perf_counter() - t0
        same = same and together == one_by_one
        hybrid += served.count("hybrid")
        batched_s.append(seconds["batched"])
        alone_s.append(seconds["alone"])
        ratios.append(seconds["batched"] / seconds["alone"])
    report: dict[str, Any] = {
        "mode": args.mode,
        "batch": args.batch,
        "batches": args.batches,
        "threads": args.threads,
        "batched_s_median": statistics.median(batched_s),
        "one_by_one_s_median": statistics.median(alone_s),
        "paired_ratio_median": statistics.median(ratios),
        "ratios": ratios,
        "hybrid_share": hybrid / (args.batch * args.batches),
        "same_outputs": same,
    }
    print(
        f"auto mode, {args.batches} batches of {args.batch} held-out agent steps, "
        f"{args.threads} threads; {100 * report['hybrid_share']:.0f} % re-done in hybrid mode"
    )
    print(f"{'arm':<14}{'s / batch (median)':>20}")
    print(f"{'batched':<14}{report['batched_s_median']:>20.3f}")
    print(f"{'one by one':<14}{report['one_by_one_s_median']:>20.3f}")
    print(
        f"paired ratio batched / one by one: {report['paired_ratio_median']:.2f} "
        f"(per batch: {', '.join(f'{r:.2f}' for r in ratios)}); same outputs: {same}"
    )
    out = args.json or Path(__file__).resolve().parent / "results" / "auto_batch.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {out}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
