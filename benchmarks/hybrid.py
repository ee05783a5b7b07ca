"""Hybrid decoding vs the AR model alone vs diffusion alone, on tool-call outputs.

For each tool-call request (the embedded chat template with a few tools), the
three decoders run side by side in one process, greedy, under the step's action
schema when the engine can compile it (``--no-schema`` turns it off):

- ``ar``: the verifier alone (:class:`ARDecoder`);
- ``hybrid``: the drafter drafts, the verifier verifies (:class:`HybridEngine`);
- ``diffusion``: the drafter alone (:class:`DiffusionEngine`).

Reported per decoder: tokens, seconds, tokens/s, forward passes of each model,
mean draft tokens kept per verify, the speed-up over ``ar`` and whether the
hybrid output equals the AR output token for token (it must). Prints a table
and writes ``benchmarks/results/hybrid.json``.

    python benchmarks/hybrid.py                                   # the packaged pair
    python benchmarks/hybrid.py --drafter DIR --verifier DIR      # any pair sharing a tokenizer
    python benchmarks/hybrid.py --random                          # random weights (acceptance ~0)

Hybrid speed depends on how often the verifier agrees with the draft: with
random weights it never does, and hybrid is slower than AR (each round pays a
draft and a verify for one token). The number that matters comes from a trained pair.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from agentflow.engine.autoregressive import ARDecoder
from agentflow.engine.chat_template import SPECIAL_TOKENS, ChatMessage, ToolSpec, render_prompt
from agentflow.engine.checkpoints import load_checkpoint
from agentflow.engine.generation import GenerationConfig, GenerationResult
from agentflow.engine.hybrid import HybridEngine, HybridOptions
from agentflow.engine.model import ModelConfig, Transformer
from agentflow.engine.sampler import DiffusionEngine
from agentflow.engine.tokenizer import Tokenizer

TOOLS = [
    ToolSpec(
        "get_order",
        "Look up an order by number: status, items, shipping.",
        {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    ),
    ToolSpec(
        "get_weather",
        "Current weather for a city.",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    ),
    ToolSpec(
        "create_ticket",
        "Open a support ticket with a summary and a priority.",
        {
            "type": "object",
            "properties": {
                "summary": {"type": "string"},
                "priority": {"enum": ["low", "normal", "high"]},
            },
            "required": ["summary", "priority"],
        },
    ),
]
REQUESTS = [
    "Where is order 58213?",
    "What's the weather in Lyon, in celsius?",
    "My blender from order 77120 arrived cracked, please open a high priority ticket.",
    "Can you check the status of order 40017 for me?",
    "Is it raining in Oslo right now?",
    "Please open a ticket: the checkout page shows an error. Normal priority.",
]
INSTRUCTIONS = "You are a support agent. Call a tool when one fits; otherwise answer briefly."


def action_constraint(tokenizer: Tokenizer, max_new: int) -> Any | None:
    """A fresh session of the action schema's constraint, or None when the engine cannot compile it."""
    try:
        from agentflow.action_schema import build_action_schema
        from agentflow.engine.constraints import compile_constraint  # type: ignore[attr-defined]
    except ImportError:
        return None
    schema = build_action_schema(TOOLS, None)
    return compile_constraint(schema, tokenizer).session(max_new)


def random_pair(seed: int) -> tuple[Transformer, Transformer, Tokenizer]:
    """Random-weight drafter and verifier (dim 192, 4 layers) over a byte-level tokenizer."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=len(SPECIAL_TOKENS) + 256,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(["x"], trainer)
    tok = Tokenizer(hf)
    models_: list[Transformer] = []
    for i, attention in enumerate(("block", "causal")):
        cfg = ModelConfig(
            vocab_size=tok.vocab_size, dim=192, n_layers=4, n_heads=6, n_kv_heads=2, ffn_dim=512,
            max_seq_len=2048, attention=attention, block_length=16,  # type: ignore[arg-type]
            mask_token_id=tok.mask_id, end_token_id=tok.end_id, pad_token_id=tok.pad_id,
        )  # fmt: skip
        torch.manual_seed(seed + i)
        model = Transformer(cfg)
        model.init_weights(seed + i)
        models_.append(model.eval())
    return models_[0], models_[1], tok


def measure(name: str, run: Any, repeats: int) -> tuple[GenerationResult, float]:
    """The last result and the median seconds of ``repeats`` runs."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - t0)
    assert result is not None, name
    return result, statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drafter", default="agentflow-tiny-dlm")
    parser.add_argument("--verifier", default="agentflow-tiny-ar")
    parser.add_argument("--random", action="store_true", help="random-weight models")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--block-length", type=int, default=16)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--requests", type=int, default=len(REQUESTS))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--no-schema", action="store_true")
    parser.add_argument(
        "--draft-steps",
        type=int,
        default=1,
        help="denoising steps per draft (0: the config's rule)",
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    if args.threads:  # on a shared machine, one thread avoids measuring thread contention
        torch.set_num_threads(args.threads)

    if args.random:
        drafter, verifier, tok = random_pair(0)
        source = "random weights"
    else:
        d = load_checkpoint(args.drafter)
        v = load_checkpoint(args.verifier)
        drafter, verifier, tok = d.model, v.model, d.tokenizer
        source = f"{d.path} + {v.path}"
        HybridEngine(drafter, verifier, tok, verifier_tokenizer=v.tokenizer)  # tokenizer check
    config = GenerationConfig(
        max_new_tokens=args.max_new_tokens,
        block_length=args.block_length,
        threshold=args.threshold,
    )
    options = HybridOptions(draft_steps=args.draft_steps or None)
    hybrid = HybridEngine(drafter, verifier, tok, options=options)
    ar = ARDecoder(verifier, tok)
    diffusion = DiffusionEngine(drafter, tok)
    schema = not args.no_schema and action_constraint(tok, config.max_new_tokens) is not None

    def cons() -> list[Any] | None:
        return [action_constraint(tok, config.max_new_tokens)] if schema else None

    totals: dict[str, dict[str, float]] = {
        m: dict(tokens=0, seconds=0.0, draft_nfe=0, verify_nfe=0, accepted=0)
        for m in ("ar", "hybrid", "diffusion")
    }
    identical = 0
    cases = []
    for text in REQUESTS[: args.requests]:
        prompt = tok.encode(
            render_prompt([ChatMessage("user", text)], TOOLS, instructions=INSTRUCTIONS)
        )
        res_ar, t_ar = measure(
            "ar", lambda p=prompt: ar.generate([p], config, constraints=cons()), args.repeats
        )
        res_hy, t_hy = measure(
            "hybrid",
            lambda p=prompt: hybrid.generate([p], config, constraints=cons()),
            args.repeats,
        )
        res_df, t_df = measure("diffusion", lambda p=prompt: diffusion.generate([p], config, constraints=cons()), args.repeats)  # fmt: skip
        same = res_hy.sequences == res_ar.sequences
        identical += same
        hs = res_hy.stats
        for m, res, t in (
            ("ar", res_ar, t_ar),
            ("hybrid", res_hy, t_hy),
            ("diffusion", res_df, t_df),
        ):
            tot = totals[m]
            tot["tokens"] += res.stats.tokens
            tot["seconds"] += t
        totals["ar"]["verify_nfe"] += res_ar.stats.nfe
        totals["diffusion"]["draft_nfe"] += res_df.stats.nfe
        totals["hybrid"]["draft_nfe"] += hs.draft_nfe  # type: ignore[attr-defined]
        totals["hybrid"]["verify_nfe"] += hs.verify_nfe  # type: ignore[attr-defined]
        totals["hybrid"]["accepted"] += hs.accepted_tokens  # type: ignore[attr-defined]
        cases.append(
            {
                "request": text,
                "prompt_tokens": len(prompt),
                "identical": same,
                "ar": {"text": res_ar.text, **res_ar.stats.to_dict(), "median_seconds": t_ar},
                "hybrid": {"text": res_hy.text, **hs.to_dict(), "median_seconds": t_hy},
                "diffusion": {
                    "text": res_df.text,
                    **res_df.stats.to_dict(),
                    "median_seconds": t_df,
                },
            }
        )
    n = len(cases)
    ar_tps = totals["ar"]["tokens"] / totals["ar"]["seconds"]
    rows = []
    for m, tot in totals.items():
        tps = tot["tokens"] / tot["seconds"] if tot["seconds"] else 0.0
        verifies = tot["verify_nfe"] if m == "hybrid" else 0
        rows.append(
            {
                "mode": m,
                "tokens": int(tot["tokens"]),
                "seconds": round(tot["seconds"], 3),
                "tokens_per_s": round(tps, 1),
                "drafter_nfe": int(tot["draft_nfe"]),
                "verifier_nfe": int(tot["verify_nfe"]),
                "mean_accepted_per_verify": round(tot["accepted"] / verifies, 2)
                if verifies
                else None,
                "speedup_vs_ar": round(tps / ar_tps, 2) if ar_tps else None,
            }
        )
    print(
        f"models: {source}; {n} tool-call requests; schema constraint: {'on' if schema else 'off'};"
    )
    print(f"max_new_tokens={config.max_new_tokens}, block_length={config.block_length}, "
          f"threshold={config.threshold}, draft_steps={options.draft_steps}, "
          f"threads={torch.get_num_threads()}")  # fmt: skip
    head = f"{'mode':<10}{'tokens':>8}{'s':>9}{'tok/s':>9}{'drafter NFE':>13}{'verifier NFE':>14}{'kept/verify':>13}{'vs AR':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        kept = (
            "-" if r["mean_accepted_per_verify"] is None else f"{r['mean_accepted_per_verify']:.2f}"
        )
        print(
            f"{r['mode']:<10}{r['tokens']:>8}{r['seconds']:>9.2f}{r['tokens_per_s']:>9.1f}"
            f"{r['drafter_nfe']:>13}{r['verifier_nfe']:>14}{kept:>13}{r['speedup_vs_ar']:>7.2f}x"
        )
    print(f"hybrid output identical to AR greedy: {identical}/{n}")
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": "hybrid",
        "models": source,
        "schema": schema,
        "config": {
            "max_new_tokens": config.max_new_tokens,
            "block_length": config.block_length,
            "threshold": config.threshold,
            "draft_steps": options.draft_steps,
        },
        "machine": {"platform": platform.platform(), "threads": torch.get_num_threads()},
        "summary": rows,
        "identical": f"{identical}/{n}",
        "cases": cases,
    }
    (args.out / "hybrid.json").write_text(json.dumps(payload, indent=2) + "\n")
    return 0 if identical == n else 1


if __name__ == "__main__":
    sys.exit(main())
