"""Held-out tool-use accuracy of the shipped models, side by side per decoding mode.

    python benchmarks/tool_accuracy.py [-n 200] [--modes diffusion,hybrid,ar] [--batch-size 1]

Prints the table of ``agentflow eval`` and writes ``benchmarks/results/tool_accuracy.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agentflow.cli.eval import add_parser


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="tool_accuracy")
    add_parser(parser.add_subparsers(dest="command", required=True))
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--json" not in argv:
        out = Path(__file__).resolve().parent / "results" / "tool_accuracy.json"
        argv += ["--json", str(out)]
    args = parser.parse_args(["eval", *argv])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
