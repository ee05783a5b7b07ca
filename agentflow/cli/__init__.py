"""The ``agentflow`` command line. Each subcommand lives in its own module.

A subcommand module exposes ``add_parser(subparsers)``, which registers its
parser and sets ``func=<callable(args) -> int>`` as a default. Exit codes:
0 success, 1 the command failed (model or engine error), 2 bad input (usage
errors, unreadable or invalid files: :class:`CLIError`), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentflow.models.base import Model

#: Subcommand modules; each exposes ``add_parser(subparsers)`` which registers
#: its parser and sets ``func=<callable(args) -> int>`` as a default.
SUBCOMMANDS = ("demo", "generate", "step", "run", "serve", "train", "train-ranker", "eval", "bench")

logger = logging.getLogger(__name__)


class CLIError(Exception):
    """Bad input to a subcommand (exit code 2); the message names the problem."""


def _unavailable(name: str, reason: str) -> Any:
    def fail(args: argparse.Namespace) -> int:
        raise CLIError(f"the '{name}' command is not available in this installation: {reason}")

    return fail


def build_parser() -> argparse.ArgumentParser:
    """The full parser, one sub-parser per subcommand module."""
    from agentflow import __version__

    parser = argparse.ArgumentParser(
        prog="agentflow",
        description="Agent workflows on an embedded diffusion language model.",
    )
    parser.add_argument("--version", action="version", version=f"agentflow {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"agentflow.cli.{name.replace('-', '_')}")
        except ImportError as exc:
            # A missing optional piece must not take the whole CLI down.
            logger.debug("subcommand %s unavailable: %s", name, exc)
            stub = sub.add_parser(name, help=f"(unavailable: {exc})")
            stub.set_defaults(func=_unavailable(name, str(exc)))
            continue
        module.add_parser(sub)
    return parser


def _failure_types() -> tuple[type[BaseException], ...]:
    """Errors that are the command's failure, not a bug: reported in one line, exit 1."""
    from agentflow.engine.errors import EngineError
    from agentflow.errors import AgentflowError
    from agentflow.models.openai import (
        ModelConnectionError,
        ModelHTTPError,
        ModelResponseError,
        ModelTimeoutError,
    )

    return (
        EngineError,
        AgentflowError,
        ModelHTTPError,
        ModelTimeoutError,
        ModelConnectionError,
        ModelResponseError,
        OSError,
    )


def show_progress() -> None:
    """Let the INFO records of the agentflow loggers through: a long command's progress
    lines (training, evaluation). The console script configures logging at WARNING
    before dispatching, so such a command calls this first."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("agentflow").setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agentflow`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except CLIError as exc:
        print(f"agentflow {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"agentflow {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if not isinstance(exc, _failure_types()):
            raise
        print(f"agentflow {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def add_model_arguments(parser: argparse.ArgumentParser, *, default: str | None = None) -> None:
    """``--model``, ``--mode``, ``--base-url`` as every model-using subcommand spells them."""
    parser.add_argument(
        "--model",
        default=default,
        metavar="NAME_OR_PATH",
        help="the packaged embedded model's name, a local checkpoint folder, 'test' (TestModel), "
        "or 'openai:MODEL' for an OpenAI-compatible endpoint (default: the embedded model)",
    )
    parser.add_argument(
        "--mode",
        choices=("diffusion", "hybrid", "ar", "auto"),
        default=None,
        help="decoding mode of the embedded engine (default: the model's own)",
    )
    parser.add_argument(
        "--base-url",
        default=None,
        help="endpoint for 'openai:' models (default: $OPENAI_BASE_URL or api.openai.com)",
    )


def add_score_choices_argument(parser: argparse.ArgumentParser) -> None:
    """``--score-choices`` / ``--no-score-choices`` (``GenerationConfig.score_choices``)."""
    parser.add_argument(
        "--score-choices",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="greedy, constrained: choose a tool name or enum value whole (every candidate "
        "scored in one batched forward pass) instead of on its first token "
        "(default: GenerationConfig's, off)",
    )


def score_choices_setting(args: argparse.Namespace) -> dict[str, bool]:
    """The ``score_choices`` field for a GenerationConfig, when the flag was given."""
    return {} if args.score_choices is None else {"score_choices": args.score_choices}


def add_text_threshold_argument(parser: argparse.ArgumentParser) -> None:
    """``--text-threshold X`` (``GenerationConfig.text_threshold``)."""
    parser.add_argument(
        "--text-threshold",
        type=float,
        default=None,
        help="diffusion, constrained: confidence a position needs to join a step's commits "
        "inside free text such as a copied argument (default: --threshold)",
    )


def add_canonical_argument(parser: argparse.ArgumentParser) -> None:
    """``--canonical`` / ``--no-canonical`` (constraint sessions' ``canonical``)."""
    parser.add_argument(
        "--canonical",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="constrained: keep the output on the tokenizer's own segmentation (a token "
        "the tokenizer would merge with its neighbour is refused) (default: off)",
    )


def add_copy_argument(parser: argparse.ArgumentParser, source: str) -> None:
    """``--copy`` / ``--no-copy`` (constraint sessions' ``copy_from``, with ``source``)."""
    parser.add_argument(
        "--copy",
        action=argparse.BooleanOptionalAction,
        default=False,
        help=f"constrained block diffusion with --score-choices: offer spans of {source} "
        "whole where a string value opens (default: off)",
    )
    parser.add_argument(
        "--copy-within-text",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="with --copy: inside free text, finish a value of the sources (an id, a name, a "
        "number) once the output has started it and the model goes on with it (default: off)",
    )


def load_model(spec: str | None, *, base_url: str | None = None) -> Model:
    """A model from a ``--model`` value (see :func:`agentflow.models.infer_model`).

    :class:`CLIError` when it cannot be resolved; ``base_url`` applies to ``openai:`` models.
    """
    if spec is not None and spec.startswith("openai:"):
        from agentflow.models.openai import OpenAIModel

        name = spec.removeprefix("openai:")
        if not name:
            raise CLIError("'openai:' needs a model name, e.g. openai:gpt-4o-mini")
        return OpenAIModel(name, base_url=base_url)
    from agentflow.engine.errors import CheckpointError
    from agentflow.models import infer_model

    try:
        return infer_model(spec)
    except ImportError as exc:
        raise CLIError(
            f"the back-end for model {spec or '(default)'!r} is not available: {exc}"
        ) from exc
    except (CheckpointError, FileNotFoundError, ValueError, LookupError) as exc:
        raise CLIError(f"cannot load model {spec or '(default)'!r}: {exc}") from exc


if __name__ == "__main__":
    sys.exit(main())
