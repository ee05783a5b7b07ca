"""``agentflow train-ranker``: train the tool ranker on the corpus's training split and save it."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> None:
    from agentflow.engine.training.tool_ranker_training import RankerTraining

    defaults = RankerTraining()
    parser = subparsers.add_parser(
        "train-ranker",
        help="train the tool ranker (a prior on tool choice) and save it to a folder",
        description=(
            "Train the tool ranker of agentflow.engine.tool_ranker on the generated corpus's "
            "training split. The defaults reproduce the packaged one."
        ),
    )
    parser.add_argument("--out", required=True, type=Path, help="folder to write it to")
    parser.add_argument("--samples", type=int, default=defaults.samples, help="conversations drawn")
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--corpus-seed", type=int, default=defaults.corpus_seed)
    parser.add_argument("--order-seed", type=int, default=defaults.order_seed)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from agentflow.cli import CLIError, show_progress
    from agentflow.engine.training.tool_ranker_training import RankerTraining, train_ranker

    show_progress()
    try:
        options = RankerTraining(
            samples=args.samples,
            epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            corpus_seed=args.corpus_seed,
            order_seed=args.order_seed,
        )
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    ranker, made = train_ranker(options)
    dest = ranker.save(args.out, training=made)
    logging.getLogger("agentflow.train").info(
        "tool ranker: %s examples, last loss %s, %ss; saved to %s",
        made["examples"],
        made["last_loss"],
        made["seconds"],
        dest,
    )
    return 0
