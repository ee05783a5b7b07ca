"""``agentflow demo``: the customer-support agent answering a request end to end.

The demo is ``examples/customer_support.py`` (``build_agent(db_path, model=None)``).
It is imported as ``agentflow.examples.customer_support`` when the package was
installed with its examples, else loaded from the source checkout's
``examples/`` folder (``$AGENTFLOW_EXAMPLES``, next to the package, or
``./examples``). The run's steps — tool calls, their results, the final answer —
and its usage are printed as they come from the model; nothing is canned.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio

from agentflow.cli import CLIError, add_model_arguments, load_model
from agentflow.models.base import Model

DEFAULT_MESSAGE = "Where is my order 58213?"
EXAMPLE = "customer_support"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the customer-support agent on a request (embedded model by default)",
        description="Run the customer-support example agent on one request and print every step.",
    )
    parser.add_argument("--message", "-m", default=DEFAULT_MESSAGE, help="the customer's request")
    parser.add_argument(
        "--db",
        type=Path,
        default=None,
        help="SQLite file for the demo's shop data (default: a temp file)",
    )
    add_model_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the run as one JSON object")
    parser.set_defaults(func=run)


def examples_dir() -> Path | None:
    """The source checkout's ``examples/`` folder, or None."""
    import agentflow

    candidates = []
    if os.environ.get("AGENTFLOW_EXAMPLES"):
        candidates.append(Path(os.environ["AGENTFLOW_EXAMPLES"]))
    candidates.append(Path(agentflow.__file__).resolve().parents[1] / "examples")
    candidates.append(Path.cwd() / "examples")
    return next((c for c in candidates if (c / f"{EXAMPLE}.py").is_file()), None)


def load_example() -> ModuleType:
    """The customer-support example module; :class:`CLIError` if it cannot be found."""
    try:
        return importlib.import_module(f"agentflow.examples.{EXAMPLE}")
    except ModuleNotFoundError as exc:
        if exc.name not in ("agentflow.examples", f"agentflow.examples.{EXAMPLE}"):
            raise
    folder = examples_dir()
    if folder is None:
        raise CLIError(
            f"cannot find examples/{EXAMPLE}.py: install agentflow with its examples, "
            "run from a source checkout, or set $AGENTFLOW_EXAMPLES"
        )
    name = f"agentflow_example_{EXAMPLE}"
    spec = importlib.util.spec_from_file_location(name, folder / f"{EXAMPLE}.py")
    if spec is None or spec.loader is None:
        raise CLIError(f"cannot import {folder / f'{EXAMPLE}.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run(args: argparse.Namespace) -> int:
    from agentflow.cli.run import print_run

    if not args.message.strip():
        raise CLIError("--message is empty")
    example = load_example()
    build_agent = getattr(example, "build_agent", None)
    if not callable(build_agent):
        raise CLIError(f"{example.__file__} has no build_agent(db_path, model=None)")
    # build_agent resolves a spec itself ("test" gets the example's own TestModel setup).
    model: Model | str | None = args.model
    if args.base_url is not None:
        if not (args.model or "").startswith("openai:"):
            raise CLIError("--base-url applies to 'openai:MODEL' models only")
        model = load_model(args.model, base_url=args.base_url)
    with tempfile.TemporaryDirectory(prefix="agentflow-demo-") as tmp:
        db_path = args.db if args.db is not None else Path(tmp) / "shop.db"
        agent = build_agent(db_path, model=model)
        # Unless --mode says otherwise, the model's own default: auto for the packaged
        # pair (docs/decisions.md, "The packaged pair decodes in auto mode by default").
        if args.mode is not None:
            agent.mode = args.mode
        if not args.json:
            print(f"customer: {args.message}")
        try:
            result = anyio.run(lambda: agent.run(args.message))
        except ValueError as exc:  # a setting the model refuses (e.g. auto mode without a verifier)
            raise CLIError(str(exc)) from exc
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, default=str))
    else:
        print_run(result)
    return 0
