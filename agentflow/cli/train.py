"""``agentflow train``: train (or resume, or export) one embedded model from its config file."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train an embedded model from a config file (resumes from its last checkpoint)",
        description="Train agentflow-tiny-dlm / agentflow-tiny-ar on the generated corpus.",
    )
    parser.add_argument("--config", required=True, type=Path, help="training config JSON")
    parser.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    parser.add_argument("--max-steps", type=int, default=None, help="stop early after this step")
    parser.add_argument("--no-export", action="store_true", help="do not export when training ends")
    parser.add_argument(
        "--export-only",
        action="store_true",
        help="only export the last checkpoint (last.pt) to export_dir",
    )
    parser.add_argument("--export-dir", type=Path, default=None, help="override export_dir")
    parser.add_argument(
        "--threads", type=int, default=None, help="override optim.threads (CPU threads to train on)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agentflow.cli import show_progress
    from agentflow.engine.training.config import TrainConfig
    from agentflow.engine.training.train import export, train

    show_progress()
    config = TrainConfig.load(args.config)
    if args.threads is not None:
        config.optim.threads = args.threads
    if not args.export_only:
        result = train(config, resume=not args.fresh, max_steps=args.max_steps)
        logging.getLogger("agentflow.train").info(
            "%s: %d steps, last loss %.4f, best held-out loss %.4f, %.0fs",
            config.name,
            result.steps,
            result.last_loss,
            result.best_heldout_loss,
            result.seconds,
        )
    if args.export_only or not args.no_export:
        dest = export(config, dest=args.export_dir)
        logging.getLogger("agentflow.train").info("exported %s to %s", config.name, dest)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run ``train`` alone (``python -m agentflow.cli.train``), without the other subcommands."""
    parser = argparse.ArgumentParser(prog="agentflow")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["train", *(argv if argv is not None else __import__("sys").argv[1:])])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
