"""Block diffusion vs autoregressive decoding: tokens/s, forward passes, tokens per forward.

Both decoders run side by side in one process on models of the same size and
the same prompt (instructions, tool specs and a user message in the embedded
chat template: 471 tokens with the embedded tokenizer), for several output
lengths and batch sizes.
Prints a table and writes JSON to ``benchmarks/results/decode_speed.json``.

Without ``--dlm``/``--ar`` the models are random-weight models of the embedded
size (dim 256, 6 layers, 8 heads, 4 kv heads, ffn 688, vocab 4096) with the end
token disabled, and diffusion runs a fixed number of steps per block
(``--steps``; ``--threshold`` is off), so every run decodes exactly the asked
number of tokens. With trained checkpoints pass ``--dlm``/``--ar`` (names or
folders) and usually ``--threshold 0.9``: runs then stop at the end token,
tokens/s counts the tokens actually produced, and ``--steps`` defaults to the
engine's own default (one step cap per block position, as agents decode).
``--schema`` decodes both under the action constraint of the prompt's tools
(tool-call outputs, tokens the schema forces filled without a forward pass, for
both). ``--agent`` decodes as an agent step of ``EmbeddedModel`` does: the
action constraint with the tokenizer's own segmentation, tool names scored
whole against the conversation without its request, copies of the request's
spans and free text one sure token at a time (``text_threshold``); it prints
what each decoder wrote. Each cell also runs diffusion with
``cache_block_prefix`` (row ``diffusion+pc``): a block's clean leading positions
stay in the cache for its later steps, so those passes are shorter.

    python benchmarks/decode_speed.py                    # random weights, ~2-3 min on 2 cores
    python benchmarks/decode_speed.py --dlm agentflow-tiny-dlm --ar agentflow-tiny-ar --threshold 0.9
    python benchmarks/decode_speed.py --dlm agentflow-tiny-dlm --ar agentflow-tiny-ar --threshold 0.9 --schema
    python benchmarks/decode_speed.py --dlm agentflow-tiny-dlm --ar agentflow-tiny-ar --threshold 0.9 --agent
    python benchmarks/decode_speed.py ... --agent --prompt-cache   # later agent steps: the prompt copied

Random weights read nothing, so their prompt is cut or padded to
``--prompt-tokens``; trained checkpoints always get the whole rendered prompt
(cutting it from the left would take away the instructions and the first tool).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from agentflow.engine.autoregressive import ARDecoder
from agentflow.engine.chat_template import (
    SPECIAL_TOKENS,
    ChatMessage,
    ToolSpec,
    copy_sources,
    render_choice_prior,
    render_prompt,
)
from agentflow.engine.checkpoints import load_checkpoint
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.model import KVCache, ModelConfig, Transformer
from agentflow.engine.sampler import DiffusionEngine

EMBEDDED = dict(vocab_size=4096, dim=256, n_layers=6, n_heads=8, n_kv_heads=4, ffn_dim=688)
PROMPT_TOKENS = 400

TOOLS = [
    ToolSpec(
        "get_order",
        "Look up an order by its number and return its status, items and shipping details.",
        {
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "description": "the order number, digits only"},
                "expand": {"type": "boolean", "description": "include line items"},
            },
            "required": ["order_id"],
        },
    ),
    ToolSpec(
        "refund_order",
        "Refund some or all items of a delivered order to the original payment method.",
        {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "amount": {"type": "number", "description": "amount in the order currency"},
                "reason": {"enum": ["damaged", "late", "wrong_item", "other"]},
            },
            "required": ["order_id", "reason"],
        },
    ),
    ToolSpec(
        "search_kb",
        "Search the help-center articles and return the best matching passages.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "description": "how many passages, 1 to 10"},
            },
            "required": ["query"],
        },
    ),
    ToolSpec(
        "create_ticket",
        "Open a support ticket for a human agent with a summary and a priority.",
        {
            "type": "object",
            "properties": {
                "summary": {"type": "string"},
                "priority": {"enum": ["low", "normal", "high", "urgent"]},
                "customer_email": {"type": "string", "format": "email"},
            },
            "required": ["summary", "priority"],
        },
    ),
]
INSTRUCTIONS = (
    "You are the customer-support agent of an online shop. Use the tools to look up orders, "
    "refunds and help articles; never invent order data. Answer briefly and politely."
)
MESSAGE = (
    "Hi, my order 58213 arrived yesterday but the blender inside was cracked. Can you check "
    "the order and refund the blender? My email is dana@example.com."
)


def prompt_ids(tokenizer: Any, length: int | None = None) -> tuple[str, list[int]]:
    """The benchmark prompt and its ids: whole, or trimmed (from the left) or repeated to
    ``length`` tokens (for random weights, which read nothing)."""
    text = render_prompt([ChatMessage("user", MESSAGE)], TOOLS, instructions=INSTRUCTIONS)
    ids = tokenizer.encode(text)
    if length is None:
        return text, ids
    while len(ids) < length:
        ids = tokenizer.encode(text.split("<|user|>")[0]) + ids
    return text, ids[-length:]


def action_constraint(tokenizer: Any) -> Any:
    """The compiled action constraint of :data:`TOOLS` (compiled once, outside the timings)."""
    from agentflow.action_schema import build_action_schema
    from agentflow.engine.constraints import compile_constraint

    return compile_constraint(build_action_schema(TOOLS, None), tokenizer)


def agent_step(compiled: Any, tokenizer: Any, n: int, budget: int) -> tuple[list[Any], list[Any]]:
    """Sessions and choice priors for ``n`` rows, set up as ``EmbeddedModel`` sets up a step."""
    from agentflow.models.embedded import CANONICAL, COPY, COPY_WITHIN_TEXT

    messages = [ChatMessage("user", MESSAGE)]
    prior = render_choice_prior(messages, TOOLS, instructions=INSTRUCTIONS)
    sessions = []
    for _ in range(n):
        session = compiled.session(budget, canonical=CANONICAL)
        if COPY:
            session.copy_from(copy_sources(messages), within_text=COPY_WITHIN_TEXT)
        sessions.append(session)
    return sessions, [tokenizer.encode(prior)] * n


def byte_tokenizer() -> Any:
    """A byte-level tokenizer with the embedded special tokens (no merges): ~1 token per byte."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    from agentflow.engine.tokenizer import Tokenizer

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
    return Tokenizer(hf)


def random_model(attention: str, max_seq_len: int, seed: int) -> Transformer:
    config = ModelConfig(
        **EMBEDDED,  # type: ignore[arg-type]
        max_seq_len=max_seq_len,
        attention=attention,  # type: ignore[arg-type]
        block_length=32,
        mask_token_id=1,
        end_token_id=None,  # random weights: decode exactly the asked number of tokens
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    model = Transformer(config)
    model.init_weights(seed)
    return model.eval()


def forward_costs(
    model: Transformer, ids: list[int], sizes: list[int], repeats: int
) -> list[dict[str, float]]:
    """Median seconds of one cached forward pass over ``n`` new tokens after the prompt.

    This is the curve both decoders live on: AR pays ``t(1)`` per token, a diffusion
    step pays ``t(block + carried)``. Diffusion beats AR by R only when its forward
    passes per token stay under ``t(1) / (R * t(block))``.
    """
    cfg = model.config
    p = len(ids)
    cache = KVCache(cfg, 1, p + max(sizes) + 1)
    with torch.inference_mode():
        model(torch.tensor([ids]), cache=cache, commit_len=p)
        rows = []
        for n in sizes:
            tokens = torch.full((1, n), cfg.mask_token_id or 0, dtype=torch.long)
            positions = torch.arange(p, p + n).unsqueeze(0)
            # one block for a block model; causal ids (= positions) otherwise
            block_ids = positions if cfg.attention == "causal" else torch.full((1, n), p)

            def run(
                t: Tensor = tokens, pos: Tensor = positions, ids_: Tensor = block_ids
            ) -> Tensor:
                return model(t, positions=pos, block_ids=ids_, cache=cache)

            run()
            _, seconds = timed(run, repeats)
            rows.append({"new_tokens": n, "ms": seconds * 1000})
    base = rows[0]["ms"]
    for r in rows:
        r["vs_one_token"] = r["ms"] / base
    return rows


def timed(fn: Any, repeats: int) -> tuple[Any, float]:
    """The last result and the median wall time over ``repeats`` runs."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return result, statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dlm", default=None, help="diffusion checkpoint (default: random weights)"
    )
    parser.add_argument(
        "--ar", default=None, help="autoregressive checkpoint (default: random weights)"
    )
    parser.add_argument("--new-tokens", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--block-length", type=int, default=32)
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="refinement steps cap per block (default: 8 without --threshold, the fixed "
        "schedule; with it the engine's default, one block length)",
    )
    parser.add_argument(
        "--threshold", type=float, default=None, help="confidence threshold (default: off)"
    )
    parser.add_argument(
        "--schema", action="store_true", help="decode under the action constraint of the tools"
    )
    parser.add_argument(
        "--agent",
        action="store_true",
        help="decode as an EmbeddedModel agent step (implies --schema): canonical "
        "segmentation, tool names scored whole, copy choices, text_threshold",
    )
    parser.add_argument(
        "--prompt-cache",
        action="store_true",
        help="both decoders keep their prompt cache (engine default): the repeated prompt "
        "is copied, not read, as in an agent's later steps (default: every run reads it)",
    )
    parser.add_argument(
        "--prompt-tokens",
        type=int,
        default=PROMPT_TOKENS,
        help="prompt length for random weights (trained checkpoints get the whole prompt)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per cell (median)")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "decode_speed.json"
    )
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = 8 if args.threshold is None else args.block_length
    if args.threads:
        torch.set_num_threads(args.threads)

    max_len = args.prompt_tokens + max(args.new_tokens) + args.block_length
    if args.dlm:
        loaded = load_checkpoint(args.dlm)
        dlm, tokenizer = loaded.model, loaded.tokenizer
    else:
        dlm, tokenizer = random_model("block", max_len, 0), byte_tokenizer()
    ar = load_checkpoint(args.ar).model if args.ar else random_model("causal", max_len, 1)
    if dlm.num_parameters() != ar.num_parameters():
        print(
            f"note: model sizes differ ({dlm.num_parameters()} vs {ar.num_parameters()} parameters)"
        )
    args.schema = args.schema or args.agent
    trained = bool(args.dlm)
    _, ids = prompt_ids(tokenizer, None if trained else args.prompt_tokens)
    # Without --prompt-cache every timed run reads its prompt, as the figures always have.
    keep = 8 if args.prompt_cache else 0
    diffusion = DiffusionEngine(dlm, prompt_cache=keep)
    autoregressive = ARDecoder(ar, prompt_cache=keep)
    base = GenerationConfig(
        block_length=args.block_length, steps=args.steps, threshold=args.threshold
    )
    if args.agent:
        from agentflow.models.embedded import TEXT_THRESHOLD

        base = replace(base, score_choices=True, text_threshold=TEXT_THRESHOLD)

    compiled = action_constraint(tokenizer) if args.schema else None

    def step_kwargs(n: int, budget: int) -> dict[str, Any]:
        """What one decoder call gets besides the prompts and the config."""
        if compiled is None:
            return {}
        if args.agent:
            sessions, priors = agent_step(compiled, tokenizer, n, budget)
            return {"constraints": sessions, "choice_priors": priors}
        return {"constraints": [compiled.session(budget) for _ in range(n)]}

    # Warm up both paths (allocator, SDPA kernels) outside the timings.
    warm = replace(base, max_new_tokens=args.block_length)
    diffusion.generate([ids], warm, **step_kwargs(1, args.block_length))
    autoregressive.generate([ids], warm, **step_kwargs(1, args.block_length))
    written: dict[str, str] = {}

    rows: list[dict[str, Any]] = []
    for batch in args.batch:
        prompts = [ids] * batch
        for new in args.new_tokens:
            cfg = replace(base, max_new_tokens=new)
            cell: dict[str, dict[str, Any]] = {}
            runs = (
                ("diffusion", diffusion, cfg),
                ("diffusion+pc", diffusion, replace(cfg, cache_block_prefix=True)),
                ("ar", autoregressive, cfg),
            )
            for mode, decoder, run_cfg in runs:
                result, seconds = timed(
                    lambda d=decoder, p=prompts, c=run_cfg: d.generate(
                        p, c, **step_kwargs(len(p), c.max_new_tokens)
                    ),
                    args.repeats,
                )
                if trained:
                    written[f"{mode}, batch {batch}, {new} new"] = tokenizer.decode(
                        result.sequences[0]
                    )
                s = result.stats
                per_row_nfe = s.nfe  # one forward pass serves the whole batch
                tokens_per_row = s.tokens / batch
                cell[mode] = {
                    "mode": mode,
                    "batch": batch,
                    "new_tokens": new,
                    "tokens": s.tokens,
                    "nfe": s.nfe,
                    "forwards_per_token": per_row_nfe / tokens_per_row if tokens_per_row else 0.0,
                    "tokens_per_forward": tokens_per_row / per_row_nfe if per_row_nfe else 0.0,
                    "seconds": seconds,
                    "tokens_per_second": s.tokens / seconds,
                    "forced_tokens": s.forced_tokens,
                }
            for mode, _, _ in runs:
                speed = cell[mode]["tokens_per_second"] / cell["ar"]["tokens_per_second"]
                cell[mode]["speedup_vs_ar"] = speed
                rows.append(cell[mode])

    header = f"{'mode':<14}{'batch':>6}{'new':>6}{'tokens':>8}{'nfe':>6}{'fwd/tok':>9}{'tok/fwd':>9}{'seconds':>9}{'tok/s':>9}{'vs AR':>7}"
    print(f"prompt {len(ids)} tokens; block {args.block_length}, steps {args.steps}, threshold {args.threshold}; "
          f"action constraint {'as an agent step' if args.agent else 'on' if args.schema else 'off'}; "
          f"prompt cache {'on' if args.prompt_cache else 'off'}; "
          f"{'random weights' if not args.dlm else args.dlm}; torch threads {torch.get_num_threads()}; "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(
        "diffusion+pc: the same with cache_block_prefix (a block's clean leading positions cached)"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['mode']:<14}{r['batch']:>6}{r['new_tokens']:>6}{r['tokens']:>8}{r['nfe']:>6}"
            f"{r['forwards_per_token']:>9.3f}{r['tokens_per_forward']:>9.2f}{r['seconds']:>9.2f}"
            f"{r['tokens_per_second']:>9.1f}{r['speedup_vs_ar']:>6.2f}x"
        )
    if written:
        print("\nwhat each decoder wrote (first row)")
        for cell_name, text in written.items():
            print(f"  {cell_name}: {text}")
    report = {
        "benchmark": "decode_speed",
        "weights": {"dlm": args.dlm or "random", "ar": args.ar or "random"},
        "model": EMBEDDED if not args.dlm else dlm.config.to_dict(),
        "prompt_tokens": len(ids),
        "block_length": args.block_length,
        "steps": args.steps,
        "threshold": args.threshold,
        "schema": args.schema,
        "agent_step": args.agent,
        "prompt_cache": args.prompt_cache,
        "outputs": written,
        "torch_threads": torch.get_num_threads(),
        # Figures on a shared machine depend on its load; record it with them.
        "load_average_1m": os.getloadavg()[0],
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "rows": rows,
    }
    # The cost of one forward pass against the number of new tokens it carries.
    sizes = sorted(
        {1, 2, 4, 8, 16, args.block_length, args.block_length + 1, 2 * args.block_length}
    )
    costs = {
        "diffusion": forward_costs(dlm, ids, sizes, max(5, args.repeats)),
        "ar": forward_costs(ar, ids, sizes, max(5, args.repeats)),
    }
    print(
        f"\nforward pass over n new tokens after the {len(ids)}-token prompt (batch 1, median ms)"
    )
    print(f"{'n':>5}{'dlm ms':>9}{'x t(1)':>8}{'ar ms':>9}{'x t(1)':>8}")
    for d, a in zip(costs["diffusion"], costs["ar"], strict=True):
        print(
            f"{d['new_tokens']:>5}{d['ms']:>9.2f}{d['vs_one_token']:>8.2f}{a['ms']:>9.2f}{a['vs_one_token']:>8.2f}"
        )
    step = next(d for d in costs["diffusion"] if d["new_tokens"] == args.block_length + 1)
    bound = costs["ar"][0]["ms"] / (2.5 * step["ms"])
    print(
        f"for diffusion at 2.5x AR on this machine: <= {bound:.3f} forward passes per token "
        f"(a step over {args.block_length}+1 tokens costs {step['ms'] / costs['ar'][0]['ms']:.2f}x "
        "an AR step)"
    )
    report["forward_costs_ms"] = costs
    report["max_forwards_per_token_for_2_5x"] = bound
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
