"""``agentflow generate``: decode one prompt with the embedded engine and print the text.

The prompt is a user message rendered with the checkpoint's chat template
(``--raw`` sends it as is). ``--mode`` picks the decoder: ``diffusion`` (block
diffusion), ``ar`` (token by token, causal checkpoints) or ``hybrid`` (a
diffusion draft verified by an autoregressive model, from
``agentflow.engine.hybrid``). ``--schema FILE`` constrains the output to a JSON
Schema. With ``--json`` the output is exactly one object:
``{"text": str, "stats": {"tokens", "nfe", "forced_tokens", "seconds", "mode"}}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentflow.cli import (
    CLIError,
    add_canonical_argument,
    add_copy_argument,
    add_score_choices_argument,
    add_text_threshold_argument,
    score_choices_setting,
)
from agentflow.engine.chat_template import ChatMessage
from agentflow.engine.checkpoints import DEFAULT_MODEL, LoadedModel, load_checkpoint
from agentflow.engine.constraints.protocol import DecodeConstraint
from agentflow.engine.generation import (
    COMMIT_ORDERS,
    BlockCallback,
    GenerationConfig,
    GenerationResult,
)
from agentflow.engine.hf_chat_template import render_conversation

#: A decoder: (loaded model, args, prompt ids, config, constraint, streaming callback) → result.
Decoder = Callable[
    [
        LoadedModel,
        argparse.Namespace,
        list[int],
        GenerationConfig,
        DecodeConstraint | None,
        BlockCallback | None,
    ],
    GenerationResult,
]


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="generate text for a prompt with the embedded engine",
        description="Decode PROMPT (a user message) with a local checkpoint and print the answer.",
    )
    parser.add_argument("prompt", metavar="PROMPT", help="the user message")
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        metavar="NAME_OR_PATH",
        help=f"packaged model name or checkpoint folder (default: {DEFAULT_MODEL})",
    )
    parser.add_argument(
        "--mode",
        choices=sorted(DECODERS),
        default=None,
        help="decoder (default: diffusion, or ar for causal checkpoints)",
    )
    parser.add_argument(
        "--verifier",
        default="agentflow-tiny-ar",
        metavar="NAME_OR_PATH",
        help="autoregressive verifier of --mode hybrid (default: agentflow-tiny-ar)",
    )
    parser.add_argument(
        "--schema", type=Path, default=None, metavar="FILE", help="JSON Schema file"
    )
    parser.add_argument("--raw", action="store_true", help="send PROMPT without the chat template")
    defaults = GenerationConfig()
    parser.add_argument("--max-new-tokens", type=int, default=defaults.max_new_tokens)
    parser.add_argument("--block-length", type=int, default=defaults.block_length)
    parser.add_argument(
        "--steps", type=int, default=defaults.steps, help="refinement steps cap per block"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=defaults.threshold,
        help="commit every position at least this confident (negative: fixed steps only)",
    )
    parser.add_argument(
        "--temperature", type=float, default=defaults.temperature, help="0 = greedy"
    )
    parser.add_argument("--top-p", type=float, default=defaults.top_p)
    parser.add_argument(
        "--order",
        choices=COMMIT_ORDERS,
        default=None,
        help="diffusion commit order: most confident anywhere, or left to right in confident runs"
        " (default: the model's)",
    )
    parser.add_argument(
        "--cache-block-prefix",
        action="store_true",
        help="diffusion: cache a block's clean leading positions between its steps "
        "(shorter passes; approximate inside the block)",
    )
    add_score_choices_argument(parser)
    add_text_threshold_argument(parser)
    add_canonical_argument(parser)
    add_copy_argument(parser, "PROMPT")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def _config(args: argparse.Namespace) -> GenerationConfig:
    try:
        return GenerationConfig(
            max_new_tokens=args.max_new_tokens,
            block_length=args.block_length,
            steps=args.steps,
            threshold=None if args.threshold is not None and args.threshold < 0 else args.threshold,
            temperature=args.temperature,
            top_p=args.top_p,
            seed=args.seed,
            order=args.order,
            cache_block_prefix=args.cache_block_prefix,
            text_threshold=args.text_threshold,
            **score_choices_setting(args),
        )
    except ValueError as exc:
        raise CLIError(str(exc)) from exc


def _schema_constraint(
    path: Path,
    loaded: LoadedModel,
    budget: int,
    *,
    canonical: bool = False,
    copy_from: list[str] | None = None,
    copy_within_text: bool = False,
) -> DecodeConstraint:
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CLIError(f"cannot read schema file {str(path)!r}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise CLIError(f"schema file {str(path)!r} is not valid JSON: {exc.msg}") from exc
    from agentflow.engine.constraints import (
        AutomatonStore,
        ConstraintCompiler,
        compile_constraint,
    )

    compiler = ConstraintCompiler(max_entries=1, store=AutomatonStore.default())
    session = compile_constraint(schema, loaded.tokenizer, compiler=compiler).session(
        max_tokens=budget, canonical=canonical
    )
    if copy_from:
        session.copy_from(copy_from, within_text=copy_within_text)
    return session


def _diffusion(
    loaded: LoadedModel,
    args: argparse.Namespace,
    ids: list[int],
    config: GenerationConfig,
    constraint: DecodeConstraint | None,
    on_block: BlockCallback | None,
) -> GenerationResult:
    from agentflow.engine.sampler import DiffusionEngine

    try:
        engine = DiffusionEngine(loaded.model, loaded.tokenizer)
    except ValueError as exc:
        raise CLIError(f"--mode diffusion: {exc}") from exc
    return engine.generate([ids], config, constraints=[constraint], on_block=on_block)


def _ar(
    loaded: LoadedModel,
    args: argparse.Namespace,
    ids: list[int],
    config: GenerationConfig,
    constraint: DecodeConstraint | None,
    on_block: BlockCallback | None,
) -> GenerationResult:
    from agentflow.engine.autoregressive import ARDecoder

    try:
        decoder = ARDecoder(loaded.model, loaded.tokenizer)
    except ValueError as exc:
        raise CLIError(f"--mode ar: {exc}") from exc
    return decoder.generate([ids], config, constraints=[constraint], on_block=on_block)


def _hybrid(
    loaded: LoadedModel,
    args: argparse.Namespace,
    ids: list[int],
    config: GenerationConfig,
    constraint: DecodeConstraint | None,
    on_block: BlockCallback | None,
) -> GenerationResult:
    from agentflow.engine.hybrid import HybridEngine

    verifier = load_checkpoint(args.verifier)
    try:
        engine = HybridEngine(
            loaded.model, verifier.model, loaded.tokenizer, verifier_tokenizer=verifier.tokenizer
        )
    except ValueError as exc:
        raise CLIError(f"--mode {args.mode}: {exc}") from exc
    mode = "auto" if args.mode == "auto" else "hybrid"
    return engine.generate([ids], config, constraints=[constraint], on_block=on_block, mode=mode)


DECODERS: dict[str, Decoder] = {
    "diffusion": _diffusion,
    "ar": _ar,
    "hybrid": _hybrid,
    "auto": _hybrid,  # diffusion, re-done in hybrid mode when the draft is not trusted
}


class _Streamer:
    """Writes each newly committed piece of text as soon as its block is done."""

    def __init__(self, loaded: LoadedModel) -> None:
        self.tokenizer = loaded.tokenizer
        self.ids: list[int] = []
        self.shown = ""

    def __call__(self, row: int, token_ids: list[int]) -> None:
        self.ids.extend(token_ids)
        text = self.tokenizer.decode(self.ids)
        if text.endswith("\ufffd"):  # a multi-byte character is not complete yet
            return
        sys.stdout.write(text[len(self.shown) :])
        sys.stdout.flush()
        self.shown = text


def run(args: argparse.Namespace) -> int:
    config = _config(args)
    loaded = load_checkpoint(args.model)
    mode = args.mode or ("ar" if loaded.config.attention == "causal" else "diffusion")
    if args.raw:
        text = args.prompt
    else:
        text = render_conversation(
            loaded.format, loaded.tokenizer_config, [ChatMessage("user", args.prompt)]
        )
    ids = loaded.tokenizer.encode(text)
    if not ids:
        raise CLIError("the prompt is empty")
    constraint = (
        _schema_constraint(
            args.schema,
            loaded,
            config.max_new_tokens,
            canonical=args.canonical,
            copy_from=[args.prompt] if args.copy else None,
            copy_within_text=args.copy_within_text,
        )
        if args.schema
        else None
    )
    streamer = None if args.json else _Streamer(loaded)
    result = DECODERS[mode](loaded, args, ids, config, constraint, streamer)
    stats = result.stats
    if args.json:
        payload = {
            "text": loaded.tokenizer.decode(result.sequences[0]),
            "stats": {
                "tokens": stats.tokens,
                "nfe": stats.nfe,
                "forced_tokens": stats.forced_tokens,
                "seconds": round(stats.seconds, 6),
                "mode": stats.mode,
            },
        }
        print(json.dumps(payload, ensure_ascii=False))
    else:
        assert streamer is not None
        rest = loaded.tokenizer.decode(result.sequences[0])[len(streamer.shown) :]
        sys.stdout.write(rest + "\n")
        print(
            f"[{stats.mode}] {stats.tokens} tokens, {stats.nfe} forward passes"
            f" ({stats.tokens_per_forward:.2f} tokens/forward), {stats.forced_tokens} forced,"
            f" {stats.seconds:.2f} s",
            file=sys.stderr,
        )
    return 0
