"""What the second decode of a close tool choice fixes and costs: ``EmbeddedModel`` steps
with ``second_choice`` at its default and off.

Where the first call's tool name won by less than ``second_choice`` (log-space),
a diffusion step is decoded again with the runner-up tool and the decode the
model is surer of after the name is kept (``agentflow.engine.second_choice``).
This runs the first step of held-out conversations that need calls (single and
parallel requests of ``agentflow eval``'s held-out set) one at a time, as one
agent would, through one ``EmbeddedModel`` with the setting on and off (a step
setting, so both share the model and its caches), in alternating order:

- tool choice and exact arguments per kind of request, each way, with the steps
  fixed and broken;
- how many steps were decoded again, and in how many the runner-up was kept;
- milliseconds and forward passes per step, each way, over all steps and over
  the steps decoded again.

    python benchmarks/second_choice.py [--cases 384] [--seed 777] [--mode diffusion]

Writes ``benchmarks/results/second_choice.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import platform
from dataclasses import replace
from typing import Any

import anyio
from call_checks import alternating, requests, scores, step_options, timed, timed_step, write_report

from agentflow.engine.training.corpus import Sample
from agentflow.models import EmbeddedModel, StepRequest
from agentflow.models._decoding_defaults import SECOND_CHOICE
from agentflow.models._step_decoding import SECOND_CHOICE as DECODED_AGAIN


def one_step(model: EmbeddedModel, sample: Sample, step: StepRequest) -> dict[str, Any]:
    """One step through ``model``: its seconds, passes, scores and whether it was decoded again."""
    row = timed_step(model, sample, step)
    reason = row.pop("reason")
    return {
        **row,
        "again": DECODED_AGAIN in reason,
        "kept": f"{DECODED_AGAIN} " in reason and "(kept)" in reason,
    }


def run(
    model: EmbeddedModel, steps: list[tuple[Sample, StepRequest]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each step off and on (after one warm-up step each way), the way that goes first
    alternating, so neither gets the caches warmed by the other more often."""
    off_steps = [
        replace(step, settings={**step.settings, "second_choice": None}) for _, step in steps
    ]
    anyio.run(model.step, off_steps[0])
    anyio.run(model.step, steps[0][1])
    return alternating(
        len(steps),
        lambda i: one_step(model, steps[i][0], off_steps[i]),
        lambda i: one_step(model, *steps[i]),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    step_options(parser, "second_choice", ["diffusion", "auto"])
    args = parser.parse_args(argv)

    steps = requests(args.cases, args.seed)
    off, on = run(EmbeddedModel(mode=args.mode), steps)
    again = sum(r["again"] for r in on)
    kept = sum(r["kept"] for r in on)
    print(
        f"{len(steps)} held-out steps (seed {args.seed}, {args.mode}, second_choice "
        f"{SECOND_CHOICE}); decoded again in {again}, the runner-up kept in {kept}"
    )
    report = {
        "machine": platform.platform(),
        "seed": args.seed,
        "cases": args.cases,
        "mode": args.mode,
        "second_choice": SECOND_CHOICE,
        "steps": len(steps),
        "decoded_again": again,
        "kept": kept,
        "scores": scores(off, on),
        "cost": timed(
            off,
            on,
            {
                "all steps": list(range(len(on))),
                "decoded again": [i for i, r in enumerate(on) if r["again"]],
            },
        ),
    }
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
