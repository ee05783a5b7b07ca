"""``agentflow bench``: run a benchmark script from ``benchmarks/`` by name.

``agentflow bench --list`` lists them; ``agentflow bench NAME [ARGS...]`` runs
``benchmarks/NAME.py`` with the same Python, passing ``ARGS`` through. The
folder is found from ``$AGENTFLOW_BENCHMARKS``, else next to the installed
package (a source checkout), else ``./benchmarks``.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentflow.cli import CLIError


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="run a benchmark script from benchmarks/ (--list to see them)",
        description="Run benchmarks/NAME.py; arguments after NAME are passed to the script "
        "(use `agentflow bench NAME --help` for its own options).",
    )
    parser.add_argument("name", nargs="?", help="benchmark name (file name without .py)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.set_defaults(func=run)


def benchmarks_dir() -> Path | None:
    """Where the benchmark scripts are, or None if no folder is found."""
    import agentflow

    candidates = []
    if os.environ.get("AGENTFLOW_BENCHMARKS"):
        candidates.append(Path(os.environ["AGENTFLOW_BENCHMARKS"]))
    candidates.append(Path(agentflow.__file__).resolve().parents[1] / "benchmarks")
    candidates.append(Path.cwd() / "benchmarks")
    return next((c for c in candidates if c.is_dir()), None)


def list_benchmarks(folder: Path) -> dict[str, str]:
    """name → first line of the script's docstring, for every ``*.py`` not starting with ``_``."""
    found = {}
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        try:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        except (SyntaxError, OSError, UnicodeDecodeError):
            doc = ""
        found[path.stem] = doc.strip().splitlines()[0] if doc.strip() else ""
    return found


def run(args: argparse.Namespace) -> int:
    folder = benchmarks_dir()
    if folder is None:
        raise CLIError(
            "no benchmarks/ folder found: run from a source checkout or set $AGENTFLOW_BENCHMARKS"
        )
    available = list_benchmarks(folder)
    if args.list or not args.name:
        if not available:
            print(f"no benchmarks in {folder}")
        for name, doc in available.items():
            print(f"{name:<28} {doc}")
        return 0
    if args.name not in available:
        known = ", ".join(available) or "none"
        raise CLIError(f"unknown benchmark {args.name!r} (available: {known})")
    script = folder / f"{args.name}.py"
    completed = subprocess.run(
        [sys.executable, str(script), *args.args], cwd=folder.parent, check=False
    )
    return completed.returncode
