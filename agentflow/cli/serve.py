"""``agentflow serve``: the engine behind an OpenAI-compatible HTTP API (uvicorn)."""

from __future__ import annotations

import argparse
from typing import Any

from agentflow.cli import CLIError, load_model


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve models over an OpenAI-compatible HTTP API",
        description="Serve /v1/models and /v1/chat/completions (tools, response_format, SSE "
        "streaming). Point any OpenAI client at http://HOST:PORT/v1.",
    )
    parser.add_argument(
        "--model",
        action="append",
        default=None,
        metavar="NAME_OR_PATH",
        help="a model to serve (repeatable): the embedded model's name, a checkpoint folder, "
        "'hybrid', 'test' (default: the embedded model)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument(
        "--max-concurrency", type=int, default=None, help="cap on steps running at once"
    )
    parser.add_argument(
        "--log-level", default="info", choices=("critical", "error", "warning", "info", "debug")
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from agentflow.server import create_app

    if not 0 <= args.port <= 65535:
        raise CLIError(f"--port must be in 0..65535, got {args.port}")
    if args.max_concurrency is not None and args.max_concurrency < 1:
        raise CLIError("--max-concurrency must be at least 1")
    specs = args.model or [None]
    models = {}
    for spec in specs:
        if spec is not None and spec.startswith("openai:"):
            raise CLIError("serve serves local models; 'openai:' models are remote already")
        model = load_model(spec)
        if model.name in models:
            raise CLIError(f"two --model values resolve to the same name {model.name!r}")
        models[model.name] = model
    app = create_app(models, max_concurrency=args.max_concurrency)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
