"""What the tool-choice priors cost a step: word overlap, word vectors, the no-tool sign, argument fit.

``EmbeddedModel`` works out, for every step with tools, each tool's word overlap
with the request (``tool_relevance``), its similarity in meaning
(``tool_similarity``, WordLlama's vectors) and whether the request looks like one
no tool serves (``serves_no_tool``; all in ``agentflow.engine.tool_priors``), and
which tools the request's values cannot fill (``argument_fit``); the tool
ranker's own cost is ``benchmarks/tool_ranker.py``'s. This
times each against the step they serve,
side by side in one run:

- loading the word vectors (once per ``EmbeddedModel``), in a fresh process;
- each prior per step, for 2, 8 and 32 listed tools (median of ``--repeats``);
- one greedy agent step of the packaged drafter on the 8-tool request, with the
  priors on (the default, the ranker included) and all off, so the table shows
  their share of a step.

    python benchmarks/tool_priors.py [--repeats 200] [--steps 5]

Writes ``benchmarks/results/tool_priors.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from agentflow import Agent, tool
from agentflow.engine.argument_fit import fit_bonuses
from agentflow.engine.chat_template import ChatMessage, ToolSpec
from agentflow.engine.tool_priors import serves_no_tool
from agentflow.engine.tool_relevance import tool_bonuses
from agentflow.engine.tool_similarity import WordVectors, similarity_bonuses
from agentflow.models import EmbeddedModel

REQUEST = "hey, my parcel for order 58213 hasn't arrived yet, where is it? it's kind of urgent"
VERBS = ["refund", "track", "cancel", "reset", "notify", "deploy", "scale", "page"]
NOUNS = ["order", "parcel", "password", "service", "invoice", "host", "account", "incident"]


def tools(n: int) -> list[ToolSpec]:
    """``n`` tools with distinct names, short descriptions and a parameter or two (every
    third takes a number too), as an agent lists them."""
    out = []
    for i in range(n):
        verb, noun = VERBS[i % len(VERBS)], NOUNS[(i // len(VERBS) + i) % len(NOUNS)]
        properties: dict[str, Any] = {f"{noun}_id": {"type": "string"}}
        if i % 3 == 2:
            properties["amount"] = {"type": "number"}
        parameters = {"type": "object", "properties": properties, "required": list(properties)}
        out.append(
            ToolSpec(
                f"{verb}_{noun}_{i}", f"{verb.capitalize()} a {noun} for a customer", parameters
            )
        )
    return out


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def per_step(n: int, vectors: WordVectors, repeats: int) -> dict[str, float]:
    """Each prior's median cost for ``n`` listed tools."""
    listed = tools(n)
    return {
        "tools": n,
        "relevance_ms": median_ms(lambda: tool_bonuses(REQUEST, listed), repeats),
        "similarity_ms": median_ms(lambda: similarity_bonuses(REQUEST, listed, vectors), repeats),
        "no_tool_sign_ms": median_ms(
            lambda: serves_no_tool("thanks, bye", listed, vectors), repeats
        ),
        "argument_fit_ms": median_ms(lambda: fit_bonuses(REQUEST, listed), repeats),
    }


def load_seconds() -> dict[str, float]:
    """Loading the vectors in a fresh process: imports apart, then the files."""
    code = (
        "import time;"
        "t=time.perf_counter();"
        "from agentflow.engine.tool_similarity import WordVectors;"
        "import numpy, safetensors.numpy, tokenizers;"
        "i=time.perf_counter();"
        "WordVectors.load();"
        "print(i-t, time.perf_counter()-i)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imports, files = (float(x) for x in out.stdout.split())
    return {"imports_s": imports, "files_s": files}


def step_ms(model: EmbeddedModel, steps: int) -> dict[str, Any]:
    """Median time of one greedy step of an 8-tool agent on ``REQUEST``, in ms (the
    first step, which loads the checkpoints and compiles the schema, left out), with
    the action it wrote and its forward passes: priors that change the action change
    the work too."""

    def make(spec: ToolSpec) -> Any:
        def run(order_id: str) -> str:
            return order_id

        run.__name__ = spec.name
        run.__doc__ = spec.description
        return tool(run)

    agent = Agent("support", "Help customers.", [make(t) for t in tools(8)], model=model)
    request = agent.build_request([ChatMessage(role="user", content=REQUEST)])
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        response = anyio.run(model.step, request)
        times.append(time.perf_counter() - start)
    return {
        "ms": 1000 * statistics.median(times[1:]),
        "action": response.text,
        "forward_passes": response.usage.forward_passes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "tool_priors.json"
    )
    args = parser.parse_args(argv)

    vectors = WordVectors.load()
    rows = [per_step(n, vectors, args.repeats) for n in (2, 8, 32)]
    loading = load_seconds()
    on = step_ms(EmbeddedModel(mode="diffusion"), args.steps)
    off = step_ms(
        EmbeddedModel(
            mode="diffusion",
            tool_relevance=0,
            tool_similarity=0,
            tool_ranker=0,
            answer_bonus=0,
            argument_fit=0,
        ),
        args.steps,
    )

    print(
        f"loading the word vectors: imports {loading['imports_s']:.3f} s, files {loading['files_s']:.3f} s"
    )
    print(
        f"{'tools':>5}  {'relevance ms':>12}  {'similarity ms':>13}  {'no-tool sign ms':>15}  "
        f"{'argument fit ms':>15}"
    )
    for r in rows:
        print(
            f"{r['tools']:>5}  {r['relevance_ms']:>12.3f}  {r['similarity_ms']:>13.3f}  "
            f"{r['no_tool_sign_ms']:>15.3f}  {r['argument_fit_ms']:>15.3f}"
        )
    for label, step in (("with the priors", on), ("without", off)):
        print(
            f"one diffusion step, 8 tools, {label}: {step['ms']:.1f} ms, "
            f"{step['forward_passes']} forward passes: {step['action']}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "request": REQUEST,
                "loading": loading,
                "per_step": rows,
                "agent_step": {"priors_on": on, "priors_off": off},
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
