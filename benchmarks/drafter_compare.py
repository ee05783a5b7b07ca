"""Two drafters side by side: the packaged one and a candidate, as ``EmbeddedModel`` decodes.

A trained candidate (a deeper drafter, a longer run) is only worth shipping if
its steps are better and their cost is known. This runs the first step of
held-out conversations that need calls (single and parallel requests of
``agentflow eval``'s held-out set) one at a time, as one agent would, through
``EmbeddedModel()`` (the packaged drafter) and ``EmbeddedModel(CANDIDATE)``,
every default on and the same mode, each step through both in alternating
order:

- tool choice and exact arguments per kind of request, each way, with the steps
  fixed and broken;
- milliseconds and forward passes per step, each way, and the ratio.

    python benchmarks/drafter_compare.py CANDIDATE [--cases 384] [--seed 777] [--mode diffusion]

Writes ``benchmarks/results/drafter_compare.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import platform

from call_checks import requests, run, scores, step_options, timed, write_report

from agentflow.engine.checkpoints import load_checkpoint
from agentflow.models import EmbeddedModel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidate", help="the candidate drafter (a checkpoint folder)")
    step_options(parser, "drafter_compare", ["diffusion", "auto"])
    args = parser.parse_args(argv)

    packaged, candidate = (
        EmbeddedModel(mode=args.mode),
        EmbeddedModel(args.candidate, mode=args.mode),
    )
    shapes = {
        name: load_checkpoint(path).config.to_dict()
        for name, path in (("packaged", "agentflow-tiny-dlm"), ("candidate", args.candidate))
    }
    steps = requests(args.cases, args.seed)
    print(f"{len(steps)} held-out steps (seed {args.seed}, {args.mode}): packaged → candidate")
    off, on = run(packaged, candidate, steps)
    report = {
        "machine": platform.platform(),
        "seed": args.seed,
        "cases": args.cases,
        "mode": args.mode,
        "candidate": args.candidate,
        "layers": {name: shape["n_layers"] for name, shape in shapes.items()},
        "steps": len(steps),
        "scores": scores(off, on),
        "cost": timed(off, on, {"all steps": list(range(len(on)))}),
    }
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
