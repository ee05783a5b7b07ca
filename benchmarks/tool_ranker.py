"""How often each tool-choice prior alone would pick the right tools, and what the ranker costs.

The priors on a step's tool-name choice (``agentflow.engine.tool_priors``) are
word overlap (``tool_relevance``), similarity in meaning (``tool_similarity``)
and the learned tool ranker (``tool_ranker``). This scores each one *alone*,
without the model, on the requests of held-out sets that need calls (single and
parallel requests of ``agentflow eval``'s held-out conversations) and on fresh
conversations of the training distribution: a request is right when its
``k`` best-scored tools are exactly the ``k`` tools its calls use. Rows:

- ``relevance``, ``similarity``: each rule alone;
- ``relevance + similarity``: their bonuses as ``EmbeddedModel`` adds them
  (weights 7 and 30), the priors before the ranker;
- ``ranker``: the packaged ranker alone;
- ``all three``: the bonuses the decode gets by default (7, 30 and 1).

Then the ranker's cost per step for 2, 8 and 32 listed tools (median of
``--repeats``), and its loading time.

    python benchmarks/tool_ranker.py [--seeds 777 2027 4242 99 31337] [--cases 384]

Writes ``benchmarks/results/tool_ranker.json`` and prints a table. What the
priors do *with* the model is ``agentflow eval``'s to say (docs/constraints.md,
"Tool ranker").
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

from agentflow.engine.tool_ranker import DEFAULT_WEIGHT as RANKER_WEIGHT
from agentflow.engine.tool_ranker import ToolRanker
from agentflow.engine.tool_relevance import DEFAULT_WEIGHT as RELEVANCE_WEIGHT
from agentflow.engine.tool_relevance import relevance
from agentflow.engine.tool_similarity import DEFAULT_WEIGHT as SIMILARITY_WEIGHT
from agentflow.engine.tool_similarity import WordVectors, similarity
from agentflow.engine.training.evaluate import eval_cases
from agentflow.engine.training.tool_ranker_training import ranked_requests, top_choice_rate

Score = Callable[[str, Any], dict[str, float]]


def scorers(vectors: WordVectors, ranker: ToolRanker) -> dict[str, Score]:
    def combined(*parts: tuple[float, Score]) -> Score:
        def score(request: str, tools: Any) -> dict[str, float]:
            out = dict.fromkeys((t.name for t in tools), 0.0)
            for weight, part in parts:
                for name, value in part(request, tools).items():
                    out[name] += weight * value
            return out

        return score

    def rel(r: str, t: Any) -> dict[str, float]:
        return relevance(r, t)

    def sim(r: str, t: Any) -> dict[str, float]:
        return similarity(r, t, vectors)

    return {
        "relevance": rel,
        "similarity": sim,
        "relevance + similarity": combined((RELEVANCE_WEIGHT, rel), (SIMILARITY_WEIGHT, sim)),
        "ranker": ranker.scores,
        "all three": combined(
            (RELEVANCE_WEIGHT, rel), (SIMILARITY_WEIGHT, sim), (RANKER_WEIGHT, ranker.scores)
        ),
    }


def cost_ms(ranker: ToolRanker, repeats: int) -> list[dict[str, float]]:
    """The ranker's median cost per step for 2, 8 and 32 listed tools."""
    pool = [t for s in eval_cases(200, 5) for t in s.tools]
    request = "hey, my parcel for order 58213 hasn't arrived yet, where is it? it's kind of urgent"
    out = []
    for n in (2, 8, 32):
        listed = pool[:n]
        ranker.scores(request, listed)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            ranker.scores(request, listed)
            times.append(time.perf_counter() - start)
        out.append({"tools": n, "ms": 1000 * statistics.median(times)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[777, 2027, 4242, 99, 31337])
    parser.add_argument("--cases", type=int, default=384)
    parser.add_argument("--train-seed", type=int, default=5, help="fresh training-split draw")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "tool_ranker.json"
    )
    args = parser.parse_args(argv)

    vectors = WordVectors.load()
    start = time.perf_counter()
    ranker = ToolRanker.load(vectors=vectors)
    load_s = time.perf_counter() - start
    sets = {f"held-out {s}": ranked_requests(eval_cases(args.cases, s)) for s in args.seeds}
    sets["training distribution"] = ranked_requests(
        eval_cases(args.cases, args.train_seed, split="train")
    )
    table = {
        name: {label: top_choice_rate(score, examples) for label, examples in sets.items()}
        for name, score in scorers(vectors, ranker).items()
    }
    costs = cost_ms(ranker, args.repeats)

    labels = list(sets)
    print(f"{'prior alone':<24}" + "".join(f"{label:>24}" for label in labels))
    print(f"{'(requests)':<24}" + "".join(f"{len(sets[label]):>24}" for label in labels))
    for name, row in table.items():
        print(f"{name:<24}" + "".join(f"{100 * row[label]:>23.1f}%" for label in labels))
    print(f"loading the ranker (vectors already loaded): {1000 * load_s:.1f} ms")
    for c in costs:
        print(f"ranker scores for {c['tools']:>2} tools: {c['ms']:.3f} ms")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "requests": {label: len(sets[label]) for label in labels},
                "top_choice_rate": table,
                "load_ms": 1000 * load_s,
                "cost": costs,
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
