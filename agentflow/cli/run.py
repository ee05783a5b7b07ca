"""``agentflow run FILE.py``: import a Python file and run the agent it defines.

Convention, checked in this order:

1. a module-level ``main`` function: called as ``main(message)`` if it has a
   required parameter (``message`` is None without ``--message``), else
   ``main()``; it may be ``async``; an int it returns is the exit code; while it
   runs, ``sys.argv`` is ``[FILE.py, *ARGS]`` (ARGS: what follows ``--``);
2. a module-level ``agent`` (an :class:`agentflow.Agent`): run on ``--message``
   (required then); the steps, the final output and the usage are printed
   (``--json``: the whole run as one JSON object).

The file's folder is put first on ``sys.path`` so it can import its neighbours.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio

from agentflow.cli import CLIError


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the agent (or main()) defined in a Python file",
        description="Import FILE.py and run its module-level `main` function, or else its "
        "module-level `agent` on --message.",
    )
    parser.add_argument("file", type=Path, metavar="FILE.py", help="the Python file to run")
    parser.add_argument("--message", "-m", default=None, help="the user's message")
    parser.add_argument("--json", action="store_true", help="print the run as one JSON object")
    parser.add_argument(
        "script_args",
        nargs="*",
        metavar="-- ARGS",
        help="arguments after -- become sys.argv[1:] while main() runs",
    )
    parser.set_defaults(func=run)


def import_file(path: Path) -> ModuleType:
    """Import ``path`` as a fresh module; :class:`CLIError` if it is not an importable .py file."""
    if not path.is_file():
        raise CLIError(f"no such file: {str(path)!r}")
    if path.suffix != ".py":
        raise CLIError(f"{str(path)!r} is not a Python file (.py)")
    name = f"agentflow_user_{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CLIError(f"cannot import {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise CLIError(f"{str(path)!r} has a syntax error: {exc}") from exc
    return module


def _call_main(main: Any, message: str | None, argv: list[str]) -> int:
    params = [
        p
        for p in inspect.signature(main).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    args = (message,) if params else ()
    if len(params) > 1:
        raise CLIError("main() must take at most one required parameter (the message)")
    saved = sys.argv
    sys.argv = argv
    try:
        result = (
            anyio.run(lambda: main(*args)) if inspect.iscoroutinefunction(main) else main(*args)
        )
    finally:
        sys.argv = saved
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


def print_run(result: Any) -> None:
    """The steps (tool calls, results, errors), the final output and the usage of a run."""
    for step in result.steps:
        print(f"step {step.index + 1} [{step.agent}]", end="")
        mode = getattr(step.usage, "mode", "")
        reason = getattr(step.usage, "reason", "")
        if mode and reason and reason != "requested":
            mode = f"{mode}: {reason}"  # e.g. auto fell back to hybrid, and why
        print(f" ({mode}, {step.usage.seconds:.2f}s)" if mode else f" ({step.usage.seconds:.2f}s)")
        if step.retry_reason:
            print(f"  rejected: {step.retry_reason}")
        for outcome in step.tool_results:
            print(f"  call {outcome.name}({json.dumps(outcome.arguments, ensure_ascii=False)})")
            shown = (
                f"error: {outcome.error}"
                if outcome.error
                else json.dumps(outcome.observation(), ensure_ascii=False, default=str)
            )
            print(f"    -> {shown[:500]}")
    output = result.output
    if not isinstance(output, str):
        output = json.dumps(
            getattr(output, "model_dump", lambda: output)(), ensure_ascii=False, default=str
        )
    print(f"final: {output}")
    u = result.usage
    print(
        f"usage: {u.steps} steps, {u.tool_calls} tool calls, tokens in/out {u.input_tokens}/{u.output_tokens}"
        + (f" ({u.cached_input_tokens} in from the prompt cache)" if u.cached_input_tokens else "")
        + ", "
        f"{u.forward_passes} forward passes, {u.forced_tokens} forced tokens, "
        f"model {u.model_seconds:.2f}s, tools {u.tool_seconds:.2f}s"
    )


def run(args: argparse.Namespace) -> int:
    from agentflow.agent import Agent

    module = import_file(args.file)
    main = getattr(module, "main", None)
    if callable(main):
        return _call_main(main, args.message, [str(args.file), *args.script_args])
    agent = getattr(module, "agent", None)
    if args.script_args:
        raise CLIError("arguments after -- are for a main() function; this file defines an agent")
    if not isinstance(agent, Agent):
        raise CLIError(
            f"{str(args.file)!r} defines neither a main() function nor a module-level `agent` (an Agent)"
        )
    if not args.message:
        raise CLIError("--message is required to run the file's `agent`")
    result = agent.run_sync(args.message)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, default=str))
    else:
        print_run(result)
    return 0
