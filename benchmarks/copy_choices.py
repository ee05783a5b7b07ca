"""Copy choices off, on, and on inside free text too, side by side, on the same cases.

    python benchmarks/copy_choices.py [--model agentflow-tiny-dlm] [--seed 777] [-n 96]

Decodes the held-out cases three times with the diffusion drafter as
``EmbeddedModel`` decodes (blocks of 16, closed choices, ``text_threshold``
0.99, canonical pairs): plain; with each session given the case's request and
tool results (``ConstraintSession.copy_from``: values copied where a string
opens); and with ``within_text=True`` as well (values the text has started
finished from the sources). Prints tool choice, exact arguments, faithful
answers, wall time per case, forward passes and tokens per pass for each, the
cases each step fixed and broke, and the time ratios; writes
``benchmarks/results/copy_choices.json``. The arms run one after the other:
time them on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from agentflow.engine.checkpoints import load_checkpoint
from agentflow.engine.generation import GenerationConfig
from agentflow.engine.training.evaluate import evaluate

#: plain; copies where a string opens; and inside free text too.
ARMS = ("plain", "copy", "text")
CONFIG = GenerationConfig(
    max_new_tokens=192, block_length=16, score_choices=True, text_threshold=0.99
)


def run(model: str, seed: int, n: int, batch_size: int) -> dict[str, Any]:
    """The three arms over the same ``n`` cases, one after the other."""
    dlm = load_checkpoint(model)
    arms: dict[str, list[Any]] = {}
    seconds: dict[str, float] = {}
    for arm in ARMS:
        t0 = time.perf_counter()
        report = evaluate(
            dlm,
            None,
            modes=["diffusion"],
            n=n,
            seed=seed,
            batch_size=batch_size,
            config=CONFIG,
            canonical=True,
            copy=arm != "plain",
            copy_within_text=arm == "text",
        )
        seconds[arm] = time.perf_counter() - t0
        arms[arm] = report.cases
    out: dict[str, Any] = {"model": model, "seed": seed, "n": n, "arms": {}}
    for arm, cases in arms.items():
        calls = [c for c in cases if c.expects_calls]
        answers = [c for c in cases if c.faithful_final is not None]
        forwards = sum(c.forwards for c in cases)
        out["arms"][arm] = {
            "tool_choice": sum(c.tool_choice for c in calls) / len(calls),
            "exact_args": sum(c.exact_args for c in calls) / len(calls),
            "faithful_final": sum(c.faithful_final for c in answers) / max(len(answers), 1),
            "seconds_per_case": seconds[arm] / len(cases),
            "forwards_per_case": forwards / len(cases),
            "tokens_per_forward": sum(c.tokens for c in cases) / forwards,
        }
    for before, after, metric in (
        ("plain", "copy", "exact_args"),
        ("copy", "text", "faithful_final"),
    ):
        pairs = list(zip(arms[before], arms[after], strict=True))
        fixed = sum(1 for a, b in pairs if getattr(b, metric) and not getattr(a, metric))
        broken = sum(1 for a, b in pairs if getattr(a, metric) and not getattr(b, metric))
        out[f"{after}_over_{before}"] = {
            "metric": metric,
            "fixed": fixed,
            "broken": broken,
            "time_ratio": seconds[after] / seconds[before],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="agentflow-tiny-dlm")
    parser.add_argument("--seed", type=int, default=777)
    parser.add_argument("-n", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/copy_choices.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    res = run(args.model, args.seed, args.n, args.batch_size)
    print(f"copy choices, {args.model}, held-out seed {args.seed}, {args.n} cases")
    print(
        f"{'arm':<6} {'tool':>6} {'exact':>6} {'faithful':>8} {'s/case':>7} {'passes':>7} "
        f"{'tok/pass':>8}"
    )
    for arm, r in res["arms"].items():
        print(
            f"{arm:<6} {100 * r['tool_choice']:>5.1f}% {100 * r['exact_args']:>5.1f}% "
            f"{100 * r['faithful_final']:>7.1f}% {r['seconds_per_case']:>7.3f} "
            f"{r['forwards_per_case']:>7.1f} {r['tokens_per_forward']:>8.2f}"
        )
    for key in ("copy_over_plain", "text_over_copy"):
        step = res[key]
        after, before = key.split("_over_")
        print(
            f"{after} against {before}: {step['metric']} fixed / broken {step['fixed']} / "
            f"{step['broken']}; time {after} / {before}: {step['time_ratio']:.2f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
