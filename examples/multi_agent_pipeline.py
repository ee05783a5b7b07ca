"""Multi-agent patterns on the customer-support shop: handoffs, agents as tools, and the
pipeline helpers (sequence, fan-out/fan-in, router).

Every agent shares one model instance (the embedded engine batches their steps).

    python examples/multi_agent_pipeline.py                 # all patterns, embedded model
    python examples/multi_agent_pipeline.py --model test    # deterministic TestModel
    python examples/multi_agent_pipeline.py --pattern router "Refund order 58215"
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from customer_support import build_tools, create_database

from agentflow import Agent, Model, TestModel, fan_out, router, sequence
from agentflow.models import infer_model

PATTERNS = ("handoff", "agent_tool", "sequence", "fan_out", "router")


@dataclass
class Team:
    """The agents of the example, built once and reused by every pattern."""

    triage: Agent[None, str]
    billing: Agent[None, str]
    shipping: Agent[None, str]
    manager: Agent[None, str]
    classifier: Agent[None, Literal["billing", "shipping"]]
    drafter: Agent[None, str]
    reviewer: Agent[None, str]


def build_team(db_path: str | Path, model: Model | str | None = None) -> Team:
    """All agents on one database and one shared model."""
    create_database(db_path)
    shared: Model = (
        TestModel()
        if model == "test"
        else (model if model is not None and not isinstance(model, str) else infer_model(model))
    )
    tools = {t.name: t for t in build_tools(db_path)}
    billing = Agent(
        "billing",
        "You handle payments and refunds. Look the order up before refunding.",
        [tools["get_order"], tools["refund_order"]],
        model=shared,
        description="Payments, refunds, invoices",
        max_steps=5,
    )
    shipping = Agent(
        "shipping",
        "You answer where parcels are. Use track_shipment.",
        [tools["track_shipment"]],
        model=shared,
        description="Parcel tracking and delivery dates",
        max_steps=5,
    )
    triage = Agent(
        "triage",
        "Hand the customer to billing for money questions, to shipping for deliveries.",
        model=shared,
        handoffs=[billing, shipping],
        max_steps=8,
    )
    manager = Agent(
        "account_manager",
        "Answer the customer by asking the billing and shipping agents what you need.",
        [billing.as_tool(), shipping.as_tool()],
        model=shared,
        max_steps=5,
    )
    classifier = Agent(
        "classifier",
        "Classify the request: billing (money, refunds) or shipping (parcels, delivery).",
        output_type=Literal["billing", "shipping"],
        model=shared,
        max_steps=2,
    )
    drafter = Agent("drafter", "Write a short reply to the customer's message.", model=shared)
    reviewer = Agent(
        "reviewer",
        "Rewrite the draft reply so it is polite and at most two sentences.",
        model=shared,
    )
    return Team(triage, billing, shipping, manager, classifier, drafter, reviewer)


async def run_pattern(team: Team, pattern: str, message: str) -> Any:
    """Run one pattern on ``message``; returns its result object."""
    if pattern == "handoff":
        return await team.triage.run(message)
    if pattern == "agent_tool":
        return await team.manager.run(message)
    if pattern == "sequence":
        return await sequence(team.drafter, team.reviewer).run(message)
    if pattern == "fan_out":

        def combine(outputs: dict[str, Any]) -> str:
            return "\n".join(f"{name}: {out}" for name, out in outputs.items())

        return await fan_out(team.billing, team.shipping, combine=combine).run(message)
    if pattern == "router":
        routes = {"billing": team.billing, "shipping": team.shipping}
        return await router(team.classifier, routes).run(message)
    raise ValueError(f"unknown pattern {pattern!r}; choose from {', '.join(PATTERNS)}")


def summary(pattern: str, result: Any) -> str:
    """One line per pattern: who answered, what, at what cost."""
    who = getattr(result, "agent", None) or getattr(result, "route", None) or "-"
    return f"[{pattern}] ({who}, {result.usage.steps} steps) {result.output}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "message", nargs="?", default="Where is my order 58213, and was I refunded?"
    )
    parser.add_argument("--model", default=None, help="'test', 'hybrid', a checkpoint path")
    parser.add_argument("--pattern", choices=PATTERNS, default=None, help="run only this pattern")
    args = parser.parse_args(argv)

    async def go() -> None:
        with tempfile.TemporaryDirectory(prefix="agentflow-team-") as tmp:
            team = build_team(Path(tmp) / "shop.db", args.model)
            for pattern in [args.pattern] if args.pattern else PATTERNS:
                print(summary(pattern, await run_pattern(team, pattern, args.message)))

    anyio.run(go)
    return 0


if __name__ == "__main__":
    sys.exit(main())
