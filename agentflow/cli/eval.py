"""``agentflow eval``: held-out tool-call accuracy of the embedded models, per domain and decoding mode."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from agentflow.cli import (
    add_canonical_argument,
    add_copy_argument,
    add_score_choices_argument,
    add_text_threshold_argument,
    score_choices_setting,
    show_progress,
)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate the embedded models on the held-out tool-use set",
        description=(
            "Decode held-out conversations (unseen templates, phrasings and tool names) and report "
            "tool-choice accuracy, exact-argument match, valid-JSON rate and latency per mode."
        ),
    )
    parser.add_argument(
        "--model", default="agentflow-tiny-dlm", help="diffusion model (name or folder)"
    )
    parser.add_argument("--verifier", default="agentflow-tiny-ar", help="autoregressive model")
    parser.add_argument(
        "--modes",
        default="diffusion,hybrid,ar",
        help="comma-separated: diffusion, hybrid, ar, auto (diffusion, re-done in hybrid mode "
        "when unsure)",
    )
    parser.add_argument("-n", "--cases", type=int, default=200, help="held-out cases per mode")
    parser.add_argument("--seed", type=int, default=1234, help="held-out set seed")
    parser.add_argument(
        "--split",
        choices=("heldout", "train", "unseen"),
        default="heldout",
        help="heldout: unseen names and phrasings (default); train: fresh conversations "
        "of the training distribution (is the model under-trained, or not generalizing?); "
        "unseen: the held-out split with requests in phrasings no rule author has read",
    )
    parser.add_argument(
        "--min-prompt-tokens",
        type=int,
        default=0,
        help="put finished exchanges of other held-out conversations in front of each case "
        "until its prompt has this many tokens (the corpus keeps prompts under 512)",
    )
    parser.add_argument(
        "--tool-relevance",
        type=float,
        default=0.0,
        metavar="W",
        help="with --score-choices: add W x each tool's word overlap with the request to its "
        "name's score (agentflow.engine.tool_relevance; default 0: off)",
    )
    parser.add_argument(
        "--tool-similarity",
        type=float,
        default=0.0,
        metavar="W",
        help="with --score-choices: add W x each tool's similarity in meaning to the request "
        "(word vectors; agentflow.engine.tool_similarity; default 0: off)",
    )
    parser.add_argument(
        "--tool-ranker",
        type=float,
        default=0.0,
        metavar="W",
        help="with --score-choices: add W x the packaged tool ranker's score of each tool "
        "(agentflow.engine.tool_ranker; default 0: off)",
    )
    parser.add_argument(
        "--answer-bonus",
        type=float,
        default=0.0,
        metavar="B",
        help="with --score-choices: where a request looks like one no tool serves (no value, "
        "no word or meaning close to a tool), add B to the score of answering over calling "
        "(agentflow.engine.tool_priors; default 0: off)",
    )
    parser.add_argument(
        "--argument-fit",
        type=float,
        default=0.0,
        metavar="W",
        help="with --score-choices: take W from the name's score of a tool per kind of value "
        "the request cannot give it (an e-mail and no parameter for one, a required number "
        "and no number; agentflow.engine.argument_fit; default 0: off)",
    )
    parser.add_argument(
        "--second-choice",
        type=float,
        default=None,
        metavar="M",
        help="diffusion, with --score-choices: where the first call's tool name won by less "
        "than M (log-space), decode the step again with the runner-up and keep the decode "
        "the model is surer of after the name (agentflow.engine.second_choice; default: off)",
    )
    parser.add_argument(
        "--split-requests",
        action="store_true",
        help="decode a message holding several requests one request at a time, in the same "
        "batch, and join their calls (agentflow.engine.request_parts)",
    )
    parser.add_argument(
        "--follow-up-calls",
        action="store_true",
        help="where the calls leave a clause of the request with values untouched, decode "
        "that part as a request of its own and add its calls when they use those values "
        "(agentflow.engine.call_coverage)",
    )
    parser.add_argument(
        "--drop-redundant-calls",
        action="store_true",
        help="drop the calls after the first that take no new value from the conversation, "
        "where the calls left still serve the whole request (agentflow.engine.call_coverage)",
    )
    parser.add_argument(
        "--restore-near-copies",
        action="store_true",
        help="put back the request's values that a call wrote almost right ('11669' for "
        "'#86669') where the conversation holds the written one nowhere "
        "(agentflow.engine.near_copies)",
    )
    parser.add_argument(
        "--drop-made-up-options",
        action="store_true",
        help="drop optional arguments (not enums) whose string or number the conversation "
        "holds nowhere (agentflow.engine.made_up_options)",
    )
    parser.add_argument(
        "--structured",
        action="store_true",
        help="evaluate answers that are JSON objects of a schema the prompt shows "
        "(a set of their own: every case an answer after a tool result)",
    )
    parser.add_argument("--batch-size", type=int, default=1, help="cases decoded together")
    parser.add_argument(
        "--no-constraint", action="store_true", help="decode without the action constraint"
    )
    parser.add_argument("--block-length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=32, help="max refinement steps per block")
    from agentflow.engine.generation import COMMIT_ORDERS  # torch-free

    parser.add_argument(
        "--order",
        choices=COMMIT_ORDERS,
        default=None,
        help="diffusion commit order (default: the model's)",
    )
    parser.add_argument(
        "--threshold", type=float, default=0.9, help="confidence to commit a position"
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
    add_copy_argument(parser, "the request and its tool results")
    parser.add_argument("--json", type=Path, default=None, help="write the full report here")
    parser.add_argument(
        "--compare",
        type=Path,
        default=None,
        help="an earlier --json report of the same cases (-n, --seed, --split): print, per "
        "metric, the cases this run fixed and broke, with the exact McNemar p-value",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agentflow.engine.checkpoints import load_checkpoint
    from agentflow.engine.generation import GenerationConfig
    from agentflow.engine.training.evaluate import (
        MODES,
        NEEDS_AR,
        NEEDS_DIFFUSION,
        evaluate,
        format_table,
        write_report,
    )

    show_progress()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        print(
            f"agentflow eval: unknown mode(s) {unknown}; choose from {', '.join(MODES)}",
            file=sys.stderr,
        )
        return 2
    from agentflow.engine.tool_relevance import check_weight

    try:
        check_weight(args.tool_relevance, "--tool-relevance")
        check_weight(args.tool_similarity, "--tool-similarity")
        check_weight(args.tool_ranker, "--tool-ranker")
        check_weight(args.answer_bonus, "--answer-bonus")
        check_weight(args.argument_fit, "--argument-fit")
    except ValueError as exc:
        print(f"agentflow eval: {exc}", file=sys.stderr)
        return 2
    baseline = None
    if args.compare is not None:  # checked before decoding anything
        from agentflow.engine.training.eval_compare import check_same_cases

        try:
            baseline = json.loads(args.compare.read_text())
            check_same_cases(
                baseline["settings"],
                {
                    "n": args.cases,
                    "seed": args.seed,
                    "split": args.split,
                    "min_prompt_tokens": args.min_prompt_tokens,
                },
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"agentflow eval: cannot compare with {args.compare}: {exc}", file=sys.stderr)
            return 2
    try:
        config = GenerationConfig(
            max_new_tokens=192,
            block_length=args.block_length,
            steps=args.steps,
            threshold=args.threshold,
            order=args.order,
            cache_block_prefix=args.cache_block_prefix,
            text_threshold=args.text_threshold,
            second_choice=args.second_choice,
            **score_choices_setting(args),
        )
    except ValueError as exc:  # a knob out of range
        print(f"agentflow eval: {exc}", file=sys.stderr)
        return 2
    needs_dlm = any(m in NEEDS_DIFFUSION for m in modes)
    needs_ar = any(m in NEEDS_AR for m in modes)
    dlm = load_checkpoint(args.model) if needs_dlm else None
    ar = load_checkpoint(args.verifier) if needs_ar else None

    def progress(mode: str, done: int, total: int) -> None:
        if done == total or done % 25 < args.batch_size:
            logging.getLogger("agentflow.eval").info("%s: %d/%d", mode, done, total)

    report = evaluate(
        dlm,
        ar,
        modes=modes,  # type: ignore[arg-type]
        n=args.cases,
        seed=args.seed,
        batch_size=args.batch_size,
        constrained=not args.no_constraint,
        config=config,
        progress=progress,
        split=args.split,
        canonical=args.canonical,
        copy=args.copy,
        copy_within_text=args.copy_within_text,
        min_prompt_tokens=args.min_prompt_tokens,
        tool_relevance=args.tool_relevance,
        tool_similarity=args.tool_similarity,
        tool_ranker=args.tool_ranker,
        answer_bonus=args.answer_bonus,
        argument_fit=args.argument_fit,
        split_requests=args.split_requests,
        follow_up_calls=args.follow_up_calls,
        drop_redundant_calls=args.drop_redundant_calls,
        restore_near_copies=args.restore_near_copies,
        drop_made_up_options=args.drop_made_up_options,
        structured=args.structured,
    )
    report.settings.update(model=str(args.model), verifier=str(args.verifier))
    print(format_table(report.summary))
    if args.json is not None:
        write_report(report, args.json)
        print(f"report written to {args.json}")
    else:
        print(json.dumps(report.summary))
    if baseline is not None:
        from agentflow.engine.training.eval_compare import compare_reports, format_comparison

        print(f"\npaired against {args.compare} (fixed: right now, wrong there)")
        print(format_comparison(compare_reports(baseline, report.to_json())))
    return 0
