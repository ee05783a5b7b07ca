"""The ``agentflow`` command line. Each subcommand lives in its own module."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: Subcommand modules; each exposes ``add_parser(subparsers)`` which registers
#: its parser and sets ``func=<callable(args) -> int>`` as a default.
SUBCOMMANDS = ("demo", "generate", "step", "run", "serve", "train", "eval", "bench")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentflow", description="Agent workflows on an embedded diffusion language model."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"agentflow.cli.{name}")
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
