"""What constraints cost: schema coverage and compile time, automaton build, generation.

Side by side in one run:
1. the JSONSchemaBench sample: share of schemas compiled per subset and the
   compile-time distribution (tool-call subsets — BFCL, Glaive — separately);
2. action schemas of pydantic tool sets: schema compile and token-index time;
3. generation with a small random block-diffusion model, constrained by the
   action schema vs unconstrained, same prompts and settings: seconds, forward
   passes, share of tokens filled by jump-forward, time per step spent on masks;
   and constrained with canonical sessions (``session(canonical=True)``, the
   tokenizer's own segmentation; its pair rows are built in a warm-up first);
4. the same with the shipped ``agentflow-tiny-dlm`` on tool requests (a model
   that writes tool calls, so structure is forced and jump-forward applies).

Times are wall seconds and process CPU seconds (the CPU column is the one to
read on a shared machine; both are taken with one torch thread).

Writes ``benchmarks/results/constraint_overhead.json`` and prints a table.
Usage: ``python benchmarks/constraint_overhead.py [--quick] [--no-coverage] [--no-trained]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, Field
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from agentflow.engine.chat_template import (
    SPECIAL_TOKENS,
    ChatMessage,
    ToolSpec,
    format_tool_calls,
    render_prompt,
)
from agentflow.engine.checkpoints import load_checkpoint
from agentflow.engine.constraints import (
    ConstraintCompiler,
    action_schema,
    build_token_automaton,
    compile_json_schema,
)
from agentflow.engine.constraints.enforcement import Constraint
from agentflow.engine.constraints.schema import OutputValidationError
from agentflow.engine.errors import SchemaError
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.model import ModelConfig, Transformer
from agentflow.engine.sampler import DiffusionEngine
from agentflow.engine.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE = ROOT / ".." / "shared" / "conformance" / "jsonschemabench-sample" / "data"
TOOL_SUBSETS = ("BFCL", "Glaiveai2K")


class OrderArgs(BaseModel):
    order_id: str = Field(description="Order number", max_length=12)
    quantity: int = Field(ge=1, le=99)
    note: str | None = None
    speed: Literal["fast", "slow"] = "fast"


class WeatherArgs(BaseModel):
    city: str
    unit: Literal["c", "f"] = "c"
    days: int = Field(default=1, ge=1, le=14)


class TicketArgs(BaseModel):
    title: str = Field(max_length=80)
    priority: Literal["low", "normal", "high"]
    tags: list[str] = []


TOOLS = [
    ToolSpec("get_order", "Look up an order.", OrderArgs.model_json_schema()),
    ToolSpec("get_weather", "Weather forecast.", WeatherArgs.model_json_schema()),
    ToolSpec("open_ticket", "Open a support ticket.", TicketArgs.model_json_schema()),
]


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def coverage(limit: int | None, tok: Tokenizer, index_limit: int | None) -> dict[str, Any]:
    """Compile every sampled schema; share compiled per subset and compile times.

    For the tool-call subsets (up to ``index_limit`` schemas) the token index is
    built too, so ``compile_ms["tools+index"]`` is the whole cost of a new tool
    schema (schema compile + token index, process CPU time).
    """
    per: dict[str, dict[str, int]] = {}
    times: dict[str, list[float]] = {"all": [], "tools": [], "tools+index": []}
    files = sorted(CONFORMANCE.glob("*.json"))[: limit or None]
    for path in files:
        subset = path.stem.split("---")[0] if "---" in path.stem else path.stem.rsplit("_", 1)[0]
        schema = json.loads(path.read_text())["schema"]
        row = per.setdefault(subset, {"schemas": 0, "compiled": 0})
        row["schemas"] += 1
        start = time.perf_counter()
        start_cpu = time.process_time()
        compiled = None
        try:
            compiled = compile_json_schema(schema)
            row["compiled"] += 1
        except SchemaError:
            pass
        ms = (time.perf_counter() - start) * 1000
        times["all"].append(ms)
        if not subset.startswith(TOOL_SUBSETS):
            continue
        times["tools"].append(ms)
        if compiled is None or len(times["tools+index"]) >= (index_limit or len(files)):
            continue
        try:
            build_token_automaton(compiled.regex, tok)
        except SchemaError:
            continue
        times["tools+index"].append((time.process_time() - start_cpu) * 1000)
    total = sum(r["schemas"] for r in per.values())
    compiled_n = sum(r["compiled"] for r in per.values())
    return {
        "schemas": total,
        "compiled": compiled_n,
        "compiled_share": compiled_n / total if total else 0.0,
        "per_subset": per,
        "compile_ms": {
            k: {
                "n": len(v),
                "median": statistics.median(v) if v else None,
                "p90": _pct(v, 0.9),
                "max": max(v, default=None),
            }
            for k, v in times.items()
        },
    }


def tokenizer() -> Tokenizer:
    """A byte-level BPE trained on tool-call JSON, with the engine's special tokens."""
    corpus = [
        format_tool_calls([("get_order", {"order_id": "58213", "quantity": 2, "speed": "fast"})]),
        format_tool_calls([("get_weather", {"city": "Oslo", "unit": "c", "days": 3})]),
        format_tool_calls([("open_ticket", {"title": "Broken", "priority": "high", "tags": []})]),
        '{"final":"Your order ships tomorrow."}',
    ]
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(corpus * 50, trainer=trainer)
    return Tokenizer(hf)


def automata(tok: Tokenizer, repeats: int) -> tuple[dict[str, Any], Any]:
    """Action-schema compile and token-index times (fresh cache each repeat)."""
    schema_ms, index_ms, states = [], [], 0
    compiled = None
    for _ in range(repeats):
        compiler = ConstraintCompiler()
        compiled = compiler.compile_schema(action_schema(TOOLS, None), tok)
        schema_ms.append(compiled.stats.schema_seconds * 1000)
        index_ms.append(compiled.stats.index_seconds * 1000)
        states = compiled.stats.num_states
    return {
        "schema_compile_ms_median": statistics.median(schema_ms),
        "index_build_ms_median": statistics.median(index_ms),
        "states": states,
        "regex_chars": len(compiled.regex) if compiled else 0,
    }, compiled


def _decode_pair(
    engine: DiffusionEngine,
    tok: Tokenizer,
    compiled: Any,
    prompts: list[list[int]],
    config: GenerationConfig,
) -> dict[str, Any]:
    """Time the same prompts unconstrained, constrained and constrained with canonical
    sessions (wall and process CPU seconds)."""
    constraint = Constraint(compiled.automaton, tok)
    engine.generate([prompts[0]], config)  # warm-up
    start_cpu = time.process_time()
    for p in prompts:  # warm-up: the canonical pair rows these prompts need
        engine.generate(
            [p], config, constraints=[constraint.session(config.max_new_tokens, canonical=True)]
        )
    warm_cpu = time.process_time() - start_cpu
    rows: dict[str, Any] = {}
    for name in ("unconstrained", "constrained", "canonical"):
        seconds = cpu = tokens = nfe = forced = valid = 0.0
        for p in prompts:
            cons = (
                None
                if name == "unconstrained"
                else [constraint.session(config.max_new_tokens, canonical=name == "canonical")]
            )
            start, start_cpu = time.perf_counter(), time.process_time()
            out = engine.generate([p], config, constraints=cons)
            seconds += time.perf_counter() - start
            cpu += time.process_time() - start_cpu
            tokens += out.stats.tokens
            nfe += out.stats.nfe
            forced += out.stats.forced_tokens
            text = tok.decode(out.sequences[0], skip_special=True)
            try:
                compiled.schema.validate(text)
                valid += 1
            except OutputValidationError:
                if name != "unconstrained":
                    raise
        rows[name] = {
            "seconds": seconds,
            "cpu_seconds": cpu,
            "tokens": tokens,
            "nfe": nfe,
            "forced_share": forced / tokens if tokens else 0.0,
            "ms_per_forward": 1000 * seconds / nfe if nfe else 0.0,
            "cpu_ms_per_forward": 1000 * cpu / nfe if nfe else 0.0,
            "cpu_ms_per_token": 1000 * cpu / tokens if tokens else 0.0,
            "valid_share": valid / len(prompts),
        }
    un, co = rows["unconstrained"], rows["constrained"]
    co["mask_cpu_ms_per_step"] = co["cpu_ms_per_forward"] - un["cpu_ms_per_forward"]
    rows["time_ratio_constrained_over_unconstrained"] = co["seconds"] / un["seconds"]
    rows["cpu_ratio_constrained_over_unconstrained"] = co["cpu_seconds"] / un["cpu_seconds"]
    # Constrained answers are often longer (complete where unconstrained ones stop
    # early), so the time ratio alone overstates the cost: compare per token too.
    rows["cpu_per_token_ratio"] = co["cpu_ms_per_token"] / un["cpu_ms_per_token"]
    ca = rows["canonical"]
    rows["canonical_cpu_per_token_over_constrained"] = (
        ca["cpu_ms_per_token"] / co["cpu_ms_per_token"]
    )
    rows["canonical_warmup_cpu_seconds"] = warm_cpu
    return rows


def generation(tok: Tokenizer, compiled: Any, prompts: int) -> dict[str, Any]:
    """Constrained vs unconstrained decoding of the same prompts with a random model.

    A random model never closes a free-text string by itself: this is the worst
    case (cheap forward passes, almost nothing forced).
    """
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=tok.vocab_size,
        dim=128,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        ffn_dim=256,
        max_seq_len=512,
        attention="block",
        block_length=16,
        mask_token_id=tok.mask_id,
        end_token_id=tok.end_id,
        pad_token_id=tok.pad_id,
    )
    engine = DiffusionEngine(Transformer(cfg), tok, prompt_cache=0)
    config = GenerationConfig(max_new_tokens=96, block_length=16, steps=16, threshold=0.9)
    texts = [f"<|user|>Where is order {58213 + i}?<|assistant|>" for i in range(prompts)]
    return _decode_pair(engine, tok, compiled, [tok.encode(t) for t in texts], config)


REQUESTS = [
    "Where is order 58213? I ordered 2.",
    "What's the weather in Oslo for the next 3 days, in celsius?",
    "Please open a high priority ticket titled Broken login.",
    "Can you check order 77120, quantity 1, fast shipping?",
    "Weather in Lima tomorrow please.",
    "Open a low priority ticket: Printer jam, tag it office.",
    "Thanks, that is all for today!",
    "Look up order 40417.",
]


def trained_generation(prompts: int) -> dict[str, Any]:
    """The shipped diffusion model on tool requests, constrained by the action schema or not."""
    loaded = load_checkpoint("agentflow-tiny-dlm")
    tok = loaded.tokenizer
    start = time.process_time()
    compiled = ConstraintCompiler().compile_schema(action_schema(TOOLS, None), tok)
    index_cpu = time.process_time() - start
    engine = DiffusionEngine(loaded.model, tok, prompt_cache=0)
    config = GenerationConfig(max_new_tokens=96, block_length=loaded.config.block_length)
    texts = [render_prompt([ChatMessage("user", r)], TOOLS) for r in (REQUESTS * 4)[:prompts]]
    rows = _decode_pair(engine, tok, compiled, [tok.encode(t) for t in texts], config)
    rows["automaton"] = {
        "states": compiled.stats.num_states,
        "transitions": compiled.stats.num_transitions,
        "index_cpu_seconds": index_cpu,
    }
    return rows


def _table(title: str, g: dict[str, Any]) -> list[str]:
    lines = [
        title,
        f"{'':16s}{'wall s':>8s}{'CPU s':>8s}{'tokens':>8s}{'NFE':>6s}{'forced':>8s}"
        f"{'CPU ms/step':>12s}{'valid':>7s}",
    ]
    for name in ("unconstrained", "constrained", "canonical"):
        r = g[name]
        lines.append(
            f"{name:16s}{r['seconds']:8.2f}{r['cpu_seconds']:8.2f}{r['tokens']:8.0f}{r['nfe']:6.0f}"
            f"{100 * r['forced_share']:7.1f}%{r['cpu_ms_per_forward']:12.2f}"
            f"{100 * r['valid_share']:6.0f}%"
        )
    lines.append(
        f"constrained / unconstrained: wall {g['time_ratio_constrained_over_unconstrained']:.2f}, "
        f"CPU {g['cpu_ratio_constrained_over_unconstrained']:.2f}, "
        f"CPU per token {g['cpu_per_token_ratio']:.2f}; "
        f"mask CPU ms per step {g['constrained']['mask_cpu_ms_per_step']:.2f}"
    )
    lines.append(
        f"canonical / constrained: CPU per token "
        f"{g['canonical_cpu_per_token_over_constrained']:.2f} "
        f"(pair rows built in a warm-up of {g['canonical_warmup_cpu_seconds']:.1f} CPU s)"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer schemas and prompts")
    parser.add_argument("--no-coverage", action="store_true", help="skip the JSONSchemaBench pass")
    parser.add_argument("--no-trained", action="store_true", help="skip the shipped-model run")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one thread: a shared machine measures contention otherwise
    result: dict[str, Any] = {}
    tok = tokenizer()
    if CONFORMANCE.is_dir() and not args.no_coverage:
        result["coverage"] = coverage(200 if args.quick else None, tok, 40 if args.quick else None)
    result["automaton"], compiled = automata(tok, 3 if args.quick else 10)
    result["generation"] = generation(tok, compiled, 3 if args.quick else 8)
    if not args.no_trained:
        result["trained"] = trained_generation(8 if args.quick else 16)
    out = ROOT / "benchmarks" / "results" / "constraint_overhead.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))

    lines = []
    if "coverage" in result:
        cov = result["coverage"]
        lines.append(
            f"schemas compiled: {cov['compiled']}/{cov['schemas']} ({100 * cov['compiled_share']:.1f}%)"
        )
        for name, row in sorted(cov["per_subset"].items()):
            lines.append(f"  {name:24s} {row['compiled']:4d}/{row['schemas']:4d}")
        for k, v in cov["compile_ms"].items():
            if v["n"]:
                lines.append(
                    f"compile ms ({k}, n={v['n']}): median {v['median']:.2f}  "
                    f"p90 {v['p90']:.2f}  max {v['max']:.0f}"
                )
    a = result["automaton"]
    lines.append(
        f"action schema: compile {a['schema_compile_ms_median']:.1f} ms, index {a['index_build_ms_median']:.1f} ms, "
        f"{a['states']} states, regex {a['regex_chars']} chars"
    )
    lines += _table(
        "random model, block 16 (worst case: free text, cheap forward)", result["generation"]
    )
    if "trained" in result:
        t = result["trained"]
        lines.append(
            f"shipped tokenizer: action schema {t['automaton']['states']} states, "
            f"{t['automaton']['transitions']} transitions, index {t['automaton']['index_cpu_seconds']:.2f} s CPU"
        )
        lines += _table("agentflow-tiny-dlm, tool requests, block 32", t)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
