"""Hybrid decoding vs the AR model alone vs diffusion alone, on tool-call outputs.

For each tool-call request (the embedded chat template with a few tools), the
three decoders run side by side in one process, greedy, under the step's action
schema when the engine can compile it (``--no-schema`` turns it off):

- ``ar``: the verifier alone (:class:`ARDecoder`);
- ``hybrid``: the drafter drafts, the verifier verifies (:class:`HybridEngine`),
  drafting only while it pays (the verifier decodes alone otherwise);
- ``hybrid-all``: the same, drafting every round (``HybridOptions(adaptive=False)``);
- ``diffusion``: the drafter alone (:class:`DiffusionEngine`).

Reported per decoder: tokens, wall and CPU seconds, tokens/s on both clocks,
forward passes of each model, mean draft tokens kept per draft round, the share
of output tokens from draft rounds / verifier-only steps / the constraint's
leading forced run, the speed-up over ``ar`` and whether each hybrid output
equals the AR output token for token (it must). ``prefill s`` is what reading the
prompt costs each decoder: one forward pass over the prompt per model that reads
it, timed apart (hybrid reads it twice, once per model, whenever it drafts);
``after prefill`` is the speed-up over ``ar`` with those seconds taken off both
sides, the part of the work that drafting can speed up. The constraint is compiled
once, outside the timings (each run gets a fresh session). Prints a table and
writes ``benchmarks/results/hybrid.json``.

    python benchmarks/hybrid.py                                   # the packaged pair
    python benchmarks/hybrid.py --drafter DIR --verifier DIR      # any pair sharing a tokenizer
    python benchmarks/hybrid.py --random                          # random weights (acceptance ~0)
    python benchmarks/hybrid.py --clock cpu    # the scheduler times paths in CPU seconds
    python benchmarks/hybrid.py --warmup 1     # one untimed request first (steady state)

CPU seconds (``time.process_time``, one torch thread) are the steadier figure on
a machine shared with other work; wall seconds are what a user waits.

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


def action_constraint(tokenizer: Tokenizer) -> Any | None:
    """The action schema's compiled constraint (``.session(n)`` per request), or None without a compiler."""
    try:
        from agentflow.action_schema import build_action_schema
        from agentflow.engine.constraints import compile_constraint  # type: ignore[attr-defined]
    except ImportError:
        return None
    schema = build_action_schema(TOOLS, None)
    return compile_constraint(schema, tokenizer)


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


def prefill_seconds(model: Transformer, prompt: list[int], repeats: int = 3) -> float:
    """Median wall seconds of one forward pass over the whole prompt (what each model's
    first pass of a request costs before it decodes anything)."""
    ids = torch.tensor([prompt])
    times = []
    with torch.inference_mode():
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(ids, hidden_only=True)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(name: str, run: Any, repeats: int) -> tuple[GenerationResult, float, float]:
    """The last result and the median wall and CPU seconds of ``repeats`` runs."""
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        result = run()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    assert result is not None, name
    return result, statistics.median(walls), statistics.median(cpus)


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
    parser.add_argument(
        "--warmup", type=int, default=0, help="untimed requests first (the list's last ones)"
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="the clock the hybrid scheduler measures each path's cost with",
    )
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
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    steps = args.draft_steps or None
    decoders: dict[str, Any] = {
        # prompt_cache=0 everywhere: each request reads its prompt whole, so the rows
        # compare decoding (benchmarks/prompt_cache.py measures reusing prompts).
        "ar": ARDecoder(verifier, tok, prompt_cache=0),
        "hybrid": HybridEngine(
            drafter,
            verifier,
            tok,
            options=HybridOptions(draft_steps=steps, clock=clock, prompt_cache=0),
        ),
        "hybrid-all": HybridEngine(
            drafter,
            verifier,
            tok,
            options=HybridOptions(draft_steps=steps, adaptive=False, prompt_cache=0),
        ),
        "diffusion": DiffusionEngine(drafter, tok, prompt_cache=0),
    }
    compiled = None if args.no_schema else action_constraint(tok)

    def cons() -> list[Any] | None:
        return None if compiled is None else [compiled.session(config.max_new_tokens)]

    # Untimed warm-up requests (the last requests of the list, for every decoder alike): the
    # hybrid scheduler starts from what they measured, as it would in a long-running engine.
    for text in REQUESTS[len(REQUESTS) - args.warmup :] if args.warmup else []:
        prompt = tok.encode(
            render_prompt([ChatMessage("user", text)], TOOLS, instructions=INSTRUCTIONS)
        )
        for dec in decoders.values():
            dec.generate([prompt], config, constraints=cons())

    keys = ("tokens", "wall", "cpu", "draft_nfe", "verify_nfe", "accepted", "rounds", "prefill")
    totals = {m: dict.fromkeys(keys, 0.0) for m in decoders}
    paths = {m: {"draft": 0, "ar": 0, "constraint": 0} for m in ("hybrid", "hybrid-all")}
    identical = dict.fromkeys(("hybrid", "hybrid-all"), 0)
    cases = []
    for text in REQUESTS[: args.requests]:
        prompt = tok.encode(
            render_prompt([ChatMessage("user", text)], TOOLS, instructions=INSTRUCTIONS)
        )
        case: dict[str, Any] = {"request": text, "prompt_tokens": len(prompt)}
        read = {
            "drafter": prefill_seconds(drafter, prompt),
            "verifier": prefill_seconds(verifier, prompt),
        }
        results = {}
        for m, dec in decoders.items():
            res, wall, cpu = measure(
                m, lambda d=dec, p=prompt: d.generate([p], config, constraints=cons()), args.repeats
            )
            results[m] = res
            st = res.stats
            tot = totals[m]
            tot["tokens"] += st.tokens
            tot["wall"] += wall
            tot["cpu"] += cpu
            # Each model that runs reads the prompt once (hybrid: the drafter only if it drafts).
            tot["prefill"] += (read["verifier"] if m != "diffusion" else 0.0) + (
                read["drafter"] if m == "diffusion" or getattr(st, "draft_nfe", 0) else 0.0
            )
            if m == "ar":
                tot["verify_nfe"] += st.nfe
            elif m == "diffusion":
                tot["draft_nfe"] += st.nfe
            else:
                tot["draft_nfe"] += st.draft_nfe
                tot["verify_nfe"] += st.verify_nfe
                tot["accepted"] += st.accepted_tokens
                tot["rounds"] += st.draft_rounds
                for k in paths[m]:
                    paths[m][k] += st.path_tokens[k]
            case[m] = {"text": res.text, **st.to_dict(), "wall_s": wall, "cpu_s": cpu}
        for m in identical:
            same = results[m].sequences == results["ar"].sequences
            identical[m] += same
            case[m]["identical_to_ar"] = same
        cases.append(case)
    n = len(cases)
    ar = totals["ar"]
    rows = []
    for m, tot in totals.items():
        wall_tps = tot["tokens"] / tot["wall"] if tot["wall"] else 0.0
        cpu_tps = tot["tokens"] / tot["cpu"] if tot["cpu"] else 0.0
        row: dict[str, Any] = {
            "mode": m,
            "tokens": int(tot["tokens"]),
            "wall_s": round(tot["wall"], 3),
            "cpu_s": round(tot["cpu"], 3),
            "tokens_per_s_wall": round(wall_tps, 1),
            "tokens_per_s_cpu": round(cpu_tps, 1),
            "drafter_nfe": int(tot["draft_nfe"]),
            "verifier_nfe": int(tot["verify_nfe"]),
            "draft_rounds": int(tot["rounds"]),
            "mean_accepted_per_draft_round": round(tot["accepted"] / tot["rounds"], 2)
            if tot["rounds"]
            else None,
            "speedup_vs_ar_wall": round(wall_tps / (ar["tokens"] / ar["wall"]), 2),
            "speedup_vs_ar_cpu": round(cpu_tps / (ar["tokens"] / ar["cpu"]), 2),
            "prefill_s": round(tot["prefill"], 3),
            "speedup_vs_ar_after_prefill": round(
                (tot["tokens"] / max(tot["wall"] - tot["prefill"], 1e-9))
                / (ar["tokens"] / max(ar["wall"] - ar["prefill"], 1e-9)),
                2,
            ),
        }
        if m in paths:
            row["path_share"] = {
                k: round(v / tot["tokens"], 3) if tot["tokens"] else 0.0
                for k, v in paths[m].items()
            }
        rows.append(row)
    print(
        f"models: {source}; {n} tool-call requests; schema constraint: "
        f"{'on' if compiled is not None else 'off'}; scheduler clock: {args.clock}"
    )
    print(f"max_new_tokens={config.max_new_tokens}, block_length={config.block_length}, "
          f"threshold={config.threshold}, draft_steps={steps}, "
          f"threads={torch.get_num_threads()}, repeats={args.repeats}, warmup={args.warmup}")  # fmt: skip
    head = (
        f"{'mode':<11}{'tokens':>7}{'wall s':>8}{'cpu s':>7}{'tok/s cpu':>10}{'drafter':>8}"
        f"{'verifier':>9}{'rounds':>7}{'kept/rnd':>9}{'draft/ar/forced %':>19}"
        f"{'vs AR cpu':>10}{'vs AR wall':>11}{'prefill s':>10}{'after prefill':>14}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        kept = r["mean_accepted_per_draft_round"]
        share = r.get("path_share")
        pct = (
            "-"
            if share is None
            else "/".join(f"{100 * share[k]:.0f}" for k in ("draft", "ar", "constraint"))
        )
        print(
            f"{r['mode']:<11}{r['tokens']:>7}{r['wall_s']:>8.2f}{r['cpu_s']:>7.2f}"
            f"{r['tokens_per_s_cpu']:>10.1f}{r['drafter_nfe']:>8}{r['verifier_nfe']:>9}"
            f"{r['draft_rounds']:>7}{'-' if kept is None else f'{kept:.2f}':>9}{pct:>19}"
            f"{r['speedup_vs_ar_cpu']:>9.2f}x{r['speedup_vs_ar_wall']:>10.2f}x"
            f"{r['prefill_s']:>10.2f}{r['speedup_vs_ar_after_prefill']:>13.2f}x"
        )
    print(
        "prefill s: one forward pass over the prompt per model that reads it (measured apart); "
        "after prefill: tokens/s over wall time minus it, vs AR"
    )
    print(
        "output identical to AR greedy: " + ", ".join(f"{m} {k}/{n}" for m, k in identical.items())
    )
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": "hybrid",
        "models": source,
        "schema": compiled is not None,
        "config": {
            "max_new_tokens": config.max_new_tokens,
            "block_length": config.block_length,
            "threshold": config.threshold,
            "draft_steps": steps,
            "scheduler_clock": args.clock,
            "warmup": args.warmup,
        },
        "machine": {"platform": platform.platform(), "threads": torch.get_num_threads()},
        "summary": rows,
        "identical": {m: f"{k}/{n}" for m, k in identical.items()},
        "cases": cases,
    }
    (args.out / "hybrid.json").write_text(json.dumps(payload, indent=2) + "\n")
    return 0 if all(k == n for k in identical.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
