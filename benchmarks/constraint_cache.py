"""Compiling an action schema: indexed from scratch vs read from the automaton store.

    python benchmarks/constraint_cache.py [--repeats 5]

A new process (a CLI call, a restarted server, an eval run) used to index every
action schema it met again; with :class:`AutomatonStore` it reads the automaton
a previous process wrote (docs/constraints.md, "The token automaton"). For a
few action schemas over the shipped tokenizer — the customer-support example's
tools (``make demo``), the decode benchmark's four tools (one takes an email),
that email tool alone, and held-out eval steps — each repeat compiles the schema
with a fresh memory-only compiler and with a fresh compiler over a store that
holds it, alternating, and checks that both automata are equal. Prints the
median seconds of each, their ratio and the stored file's size; writes
``benchmarks/results/constraint_cache.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from agentflow.action_schema import build_action_schema
from agentflow.cli.demo import load_example
from agentflow.engine.checkpoints import load_checkpoint
from agentflow.engine.constraints import AutomatonStore, ConstraintCompiler, TokenAutomaton
from agentflow.engine.training.evaluate import _action_schema, eval_cases

sys.path.insert(0, str(Path(__file__).resolve().parent))
import decode_speed


def schemas() -> dict[str, dict[str, Any]]:
    """The action schemas timed, by name."""
    with tempfile.TemporaryDirectory() as folder:
        agent = load_example().build_agent(Path(folder) / "shop.db", model="test")
        demo = dict(agent.build_request([]).action_schema)
    out = {
        "demo agent (customer support)": demo,
        "decode benchmark, 4 tools": build_action_schema(decode_speed.TOOLS, None),
        "one tool with an email field": build_action_schema(decode_speed.TOOLS[3:], None),
    }
    for i, sample in enumerate(eval_cases(3, seed=777)):
        out[f"held-out step {i + 1} ({len(sample.tools)} tools)"] = _action_schema(sample)
    return out


def same(a: TokenAutomaton, b: TokenAutomaton) -> bool:
    tensors = ("final", "offsets", "tokens", "next_states", "successors", "live", "table")
    for name in tensors:
        x, y = getattr(a, name), getattr(b, name)
        if (x is None) != (y is None) or (x is not None and not torch.equal(x, y)):
            return False
    return a.num_states == b.num_states and a.done_state == b.done_state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="constraint_cache", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    tokenizer = load_checkpoint("agentflow-tiny-dlm").tokenizer
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        store = AutomatonStore(Path(folder))
        for name, schema in schemas().items():
            first = ConstraintCompiler(store=store).compile_schema(schema, tokenizer)
            path = store.path(store.key(first.regex, tokenizer, 4_000_000))
            built_s, read_s, equal = [], [], True
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                built = ConstraintCompiler().compile_schema(schema, tokenizer)
                t1 = time.perf_counter()
                read = ConstraintCompiler(store=store).compile_schema(schema, tokenizer)
                t2 = time.perf_counter()
                assert read.stats.stored
                equal = equal and same(built.automaton, read.automaton)
                built_s.append(t1 - t0)
                read_s.append(t2 - t1)
            rows.append(
                {
                    "schema": name,
                    "states": built.stats.num_states,
                    "transitions": built.stats.num_transitions,
                    "indexed_s": statistics.median(built_s),
                    "stored_s": statistics.median(read_s),
                    "ratio": statistics.median(read_s) / statistics.median(built_s),
                    "file_mb": path.stat().st_size / 2**20,
                    "equal": equal,
                }
            )
    print(
        f"{'schema':<34}{'states':>8}{'transitions':>13}{'indexed s':>11}{'stored s':>10}"
        f"{'ratio':>8}{'file MB':>9}{'equal':>7}"
    )
    for r in rows:
        print(
            f"{r['schema']:<34}{r['states']:>8}{r['transitions']:>13,}{r['indexed_s']:>11.3f}"
            f"{r['stored_s']:>10.4f}{r['ratio']:>8.3f}{r['file_mb']:>9.2f}{r['equal']!s:>7}"
        )
    out = args.json or Path(__file__).resolve().parent / "results" / "constraint_cache.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"repeats": args.repeats, "rows": rows}, indent=2) + "\n")
    print(f"written to {out}")
    return 0 if all(r["equal"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
