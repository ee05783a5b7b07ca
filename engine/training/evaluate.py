"""Held-out evaluation of the embedded models: tool choice, exact arguments, valid JSON, latency.

The held-out set comes from :class:`CorpusGenerator` with ``split="heldout"``:
request templates, chatter, instructions, tool-name verbs, descriptions and
parameter names that training never saw. Each case is decoded by the engine in
one or more modes (``diffusion``: the block-diffusion model; ``ar``: the
autoregressive model; ``hybrid``: diffusion drafts verified by the AR model;
``auto``: diffusion, re-done in hybrid mode when the draft is unsure, as
``EmbeddedModel(mode="auto")`` decodes), under the step's action constraint
unless ``constrained=False``.

Metrics (per mode, overall, per domain and per kind of turn):

- ``tool_choice``: the called tool names equal the expected ones (cases that expect calls);
- ``exact_args``: the calls, arguments included, equal the expected ones exactly;
- ``valid_json``: the output parses and validates against the action schema (all cases);
- ``final_choice``: a final answer where one is expected (no-tool turns, answers after a result);
- ``grounded_final``: answers after a tool result quote at least one of the result's values;
- ``faithful_final``: stricter: they quote every result value the reference answer uses
  (the status *and* the order id, not just the id);
- ``ms_per_step``: wall time of one step (one action) at the given batch size, and tokens per forward;
- ``hybrid_served``: ``auto`` only: the cases the hybrid fallback decoded;
- ``structured_values`` / ``structured_exact`` (``structured=True``: answers after a
  tool result that are JSON objects of a schema the prompt shows): every field the
  result fills (all but the answer sentence) equals the expected value / the whole
  object does.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

import jsonschema

from ..action_mending import mend_action
from ..chat_template import called_since_request, copy_sources, last_request
from ..generation import GenerationConfig
from ..tool_priors import step_bonuses
from ..tool_ranker import ToolRanker
from ..tool_similarity import WordVectors
from . import augment
from .corpus import CorpusGenerator, CorpusSplit, Sample
from .eval_requests import Decoder, decode_batch
from .long_prompts import lengthened

#: Compiled constraints an evaluation keeps at once (the most recent).
_KEPT_CONSTRAINTS = 32

Mode = Literal["diffusion", "hybrid", "ar", "auto"]
MODES: tuple[Mode, ...] = ("diffusion", "hybrid", "ar", "auto")
#: Modes that decode with the diffusion model, and with the autoregressive one.
NEEDS_DIFFUSION: frozenset[str] = frozenset({"diffusion", "hybrid", "auto"})
NEEDS_AR: frozenset[str] = frozenset({"ar", "hybrid", "auto"})


@dataclass
class CaseResult:
    """One decoded held-out case."""

    mode: str
    domain: str
    kind: str
    text: str
    expects_calls: bool
    valid_json: bool
    tool_choice: bool
    exact_args: bool
    final_choice: bool
    grounded_final: bool | None
    seconds: float
    tokens: int
    forwards: int
    faithful_final: bool | None = None
    #: The mode that produced the text when ``auto`` chose it (``"diffusion"`` or ``"hybrid"``).
    served: str | None = None
    #: Structured answers only: the fields copied from the result / the whole object are right.
    structured_values: bool | None = None
    structured_exact: bool | None = None


@dataclass
class EvalReport:
    """Per-mode summaries (overall and per domain) plus every case."""

    summary: dict[str, dict[str, dict[str, float]]]
    cases: list[CaseResult] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "summary": self.summary,
            "cases": [asdict(c) for c in self.cases],
        }


def eval_cases(
    n: int, seed: int = 1234, split: CorpusSplit = "heldout", *, structured: bool = False
) -> list[Sample]:
    """``n`` evaluation samples: held-out ones by default (the default seed differs
    from training's data seed too).

    ``split="unseen"`` draws held-out samples whose requests are phrased in words
    neither other split uses (:mod:`.unseen_phrasings`): the acceptance set.

    ``split="train"`` draws fresh samples of the *training* distribution instead:
    the same pools the models were trained on, new conversations. Scores there
    against the held-out ones tell an under-trained model (low on both) from one
    that does not generalize to unseen names and phrasings (high, then low).

    ``structured=True`` draws ``n`` answers after a tool result that are JSON objects
    (:mod:`.structured_finals`) instead: a set of its own, the usual split untouched.
    """
    if not structured:
        return list(CorpusGenerator(split, seed).samples(n))
    base = augment.TRAINING if split == "train" else augment.NONE
    gen = CorpusGenerator(split, seed, replace(base, structured_finals=1.0))
    out: list[Sample] = []
    while len(out) < n:
        sample = gen.sample()
        if sample.kind == "structured":
            out.append(sample)
    return out


def _action_schema(sample: Sample) -> dict[str, Any]:
    from ..constraints import action_schema

    return action_schema(list(sample.tools), sample.output_schema, parallel_calls=True)


def _canonical_calls(calls: Sequence[tuple[str, Any]]) -> Counter[str]:
    return Counter(json.dumps([name, args], sort_keys=True) for name, args in calls)


def score(sample: Sample, text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Compare one decoded action with the sample's expected action."""
    expects_calls = bool(sample.calls)
    try:
        action = json.loads(text)
        jsonschema.validate(action, schema)
        valid = True
    except (ValueError, jsonschema.ValidationError):
        action, valid = None, False
    got_calls: list[tuple[str, Any]] = []
    is_final = False
    if isinstance(action, dict):
        if isinstance(action.get("tool_calls"), list):
            got_calls = [
                (c.get("name"), c.get("arguments"))
                for c in action["tool_calls"]
                if isinstance(c, dict)
            ]
        is_final = "final" in action
    tool_choice = expects_calls and Counter(n for n, _ in got_calls) == Counter(
        n for n, _ in sample.calls
    )
    exact = expects_calls and _canonical_calls(got_calls) == _canonical_calls(sample.calls)
    grounded: bool | None = None
    faithful: bool | None = None
    if sample.kind == "final" and sample.messages and sample.messages[-1].role == "tool":
        result = json.loads(sample.messages[-1].content)
        values = [str(v) for v in result.values() if isinstance(v, (str, int, float)) and str(v)]
        answer = action.get("final") if is_final and isinstance(action, dict) else None
        grounded = isinstance(answer, str) and any(v in answer for v in values)
        needed = [v for v in values if _quotes(sample.final or "", v)]
        if needed:
            faithful = isinstance(answer, str) and all(_quotes(answer, v) for v in needed)
    values_right: bool | None = None
    exact_output: bool | None = None
    if sample.output is not None:
        got = action.get("final") if is_final and isinstance(action, dict) else None
        exact_output = got == sample.output
        values_right = isinstance(got, dict) and all(
            k in got and got[k] == v for k, v in sample.output.items() if v != sample.final
        )
    return {
        "expects_calls": expects_calls,
        "valid_json": valid,
        "tool_choice": bool(tool_choice),
        "exact_args": bool(exact),
        "final_choice": (not expects_calls) and is_final,
        "grounded_final": grounded,
        "faithful_final": faithful,
        "structured_values": values_right,
        "structured_exact": exact_output,
    }


def _quotes(text: str, value: str) -> bool:
    """``value`` occurs in ``text`` as a whole word (``0`` does not occur in ``120``)."""
    return len(value) >= 2 and re.search(rf"(?<![\w.]){re.escape(value)}(?![\w])", text) is not None


def make_decoder(mode: Mode, dlm: Any, ar: Any) -> Decoder:
    """A function decoding a batch of prompts in ``mode`` with loaded checkpoints (``LoadedModel``)."""
    if mode == "diffusion":
        from ..sampler import DiffusionEngine

        engine: Any = DiffusionEngine(dlm.model, dlm.tokenizer)
        kwargs: dict[str, Any] = {}
    elif mode == "ar":
        from ..autoregressive import ARDecoder

        engine = ARDecoder(ar.model, ar.tokenizer)
        kwargs = {}
    elif mode in ("hybrid", "auto"):
        from ..hybrid import HybridEngine

        engine = HybridEngine(dlm.model, ar.model, dlm.tokenizer, verifier_tokenizer=ar.tokenizer)
        kwargs = {"mode": mode}
    else:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    tokenizer = dlm.tokenizer if dlm is not None else ar.tokenizer

    def decode(
        prompts: list[str], sessions: list[Any], config: GenerationConfig, priors: list[str | None]
    ) -> tuple[list[str], list[Any], float, list[str | None]]:
        t0 = time.perf_counter()
        # Every mode reads the priors (hybrid's verifier makes the choices as ARDecoder does).
        choice = {"choice_priors": priors} if config.score_choices else {}
        result = engine.generate(
            prompts, config, constraints=sessions if sessions else None, **kwargs, **choice
        )
        seconds = time.perf_counter() - t0
        texts = result.texts or [tokenizer.decode(s) for s in result.sequences]
        served: list[str | None] = [None] * len(texts)
        if mode == "auto":
            served = [s.mode for s in result.stats.served]
        return list(texts), list(result.stats.rows), seconds, served

    return decode


def evaluate(
    dlm: Any,
    ar: Any,
    *,
    modes: Sequence[Mode] = MODES,
    n: int = 200,
    seed: int = 1234,
    batch_size: int = 1,
    constrained: bool = True,
    config: GenerationConfig | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    split: CorpusSplit = "heldout",
    canonical: bool = False,
    copy: bool = False,
    copy_within_text: bool = False,
    min_prompt_tokens: int = 0,
    tool_relevance: float = 0.0,
    tool_similarity: float = 0.0,
    tool_ranker: float = 0.0,
    answer_bonus: float = 0.0,
    argument_fit: float = 0.0,
    split_requests: bool = False,
    follow_up_calls: bool = False,
    drop_redundant_calls: bool = False,
    restore_near_copies: bool = False,
    drop_made_up_options: bool = False,
    structured: bool = False,
) -> EvalReport:
    """Decode ``n`` held-out cases (or training-distribution ones, ``split="train"``)
    in each mode and score them; ``canonical`` goes to the constraint sessions, and
    ``copy`` gives them the request to copy values from (``copy_from``), and
    ``copy_within_text`` lets free text finish the values it starts to quote.
    ``min_prompt_tokens`` puts earlier exchanges in front of each case until its
    prompt is that long (:mod:`.long_prompts`). ``tool_relevance`` (a weight; 0:
    off) adds each tool's relevance to the request to its name's score
    (:mod:`agentflow.engine.tool_relevance`), ``tool_similarity`` (a weight; 0: off)
    its similarity in meaning (:mod:`agentflow.engine.tool_similarity`),
    ``tool_ranker`` (a weight; 0: off) the packaged tool ranker's score
    (:mod:`agentflow.engine.tool_ranker`); each
    bonus favours a tool once per step (``prefer(..., once=True)``).
    ``answer_bonus`` (0: off) favours an answer over a call where the request looks
    like one no tool serves (:mod:`agentflow.engine.tool_priors`). ``argument_fit``
    (a weight; 0: off) penalises the tools the request's values cannot fill
    (:mod:`agentflow.engine.argument_fit`) where the case's last turn is the user's.
    ``split_requests`` decodes a message holding several requests one request at a
    time (:mod:`agentflow.engine.request_parts`) and ``follow_up_calls`` one more
    call where the calls leave a clause of the request with values untouched
    (:mod:`agentflow.engine.call_coverage`);
    ``drop_redundant_calls`` then drops the calls after the first that take no new
    value from the conversation (:func:`~..call_coverage.without_redundant_calls`).
    ``restore_near_copies`` last puts back the request's values that the calls
    wrote almost right (:mod:`agentflow.engine.near_copies`), and
    ``drop_made_up_options`` then drops optional arguments whose values nobody gave
    (:mod:`agentflow.engine.made_up_options`). ``structured``
    evaluates answers that are JSON objects instead (:func:`eval_cases`)."""
    config = config or GenerationConfig(max_new_tokens=192, block_length=32, steps=32)
    tokenizer = dlm.tokenizer if dlm is not None else ar.tokenizer
    samples = lengthened(
        eval_cases(n, seed, split, structured=structured),
        min_prompt_tokens,
        lambda text: len(tokenizer.encode(text)),
        seed=seed,
        split=split,
    )
    schemas = [_action_schema(s) if constrained else _plain_schema(s) for s in samples]
    needs_vectors = tool_similarity > 0 or answer_bonus > 0 or tool_ranker > 0
    vectors = WordVectors.load() if needs_vectors else None
    ranker = ToolRanker.load(vectors=vectors) if tool_ranker > 0 else None
    # Compiled as the batches need them and only the recent ones kept: an action
    # schema's automaton takes tens of MB, and 384 of them held at once took 7.7 GB.
    compiled: OrderedDict[str, Any] = OrderedDict()  # schema -> Constraint, most recent last
    if constrained:
        from ..constraints import AutomatonStore, ConstraintCompiler
        from ..constraints.enforcement import Constraint

        # ``compiled`` is the memory cache; the store keeps automata across runs.
        compiler = ConstraintCompiler(max_entries=1, store=AutomatonStore.default())

    def constraint_for(schema: dict[str, Any]) -> Any:
        key = json.dumps(schema, sort_keys=True)
        if key not in compiled:
            automaton = compiler.compile_schema(schema, tokenizer).automaton
            compiled[key] = Constraint(automaton, tokenizer)
            while len(compiled) > _KEPT_CONSTRAINTS:
                compiled.popitem(last=False)
        compiled.move_to_end(key)
        return compiled[key]

    def session_for(i: int, part: str | None = None) -> Any:
        """Case ``i``'s constraint session, with its copy sources and bonuses; ``part``
        of the request (one request of several, or the part a follow-up is for)
        stands for the request where given."""
        session = constraint_for(schemas[i]).session(config.max_new_tokens, canonical=canonical)
        sources = copy_sources(samples[i].messages)
        request = last_request(samples[i].messages)
        if part is not None:
            sources, request = [part, *sources[1:]], part
        if copy:
            session.copy_from(sources, within_text=copy_within_text)
        step_bonuses(
            request,
            samples[i].tools,
            relevance_weight=tool_relevance,
            similarity_weight=tool_similarity,
            answer_bonus=answer_bonus if part is None else 0.0,
            vectors=vectors,
            fit_weight=argument_fit if samples[i].messages[-1].role == "user" else 0.0,
            ranker=ranker,
            ranker_weight=tool_ranker,
            called=called_since_request(samples[i].messages),
        ).apply(session)
        return session

    results: list[CaseResult] = []
    for mode in modes:
        decode = make_decoder(mode, dlm, ar)
        for start in range(0, len(samples), batch_size):
            chunk = range(start, min(start + batch_size, len(samples)))
            priors = [samples[i].choice_prior() for i in chunk]
            texts, rows, seconds, served = decode_batch(
                decode,
                [samples[i] for i in chunk],
                [schemas[i] for i in chunk],
                priors,
                partial(_shifted, session_for, chunk.start) if constrained else None,
                config,
                split_requests=split_requests,
                follow_up_calls=follow_up_calls,
            )
            if constrained and (
                drop_redundant_calls or restore_near_copies or drop_made_up_options
            ):
                for row, i in enumerate(chunk):
                    s = samples[i]
                    texts[row], _ = mend_action(
                        texts[row],
                        s.messages,
                        s.tools,
                        s.instructions,
                        schemas[i],
                        drop_redundant_calls=drop_redundant_calls,
                        restore_copies=restore_near_copies,
                        drop_made_up_options=drop_made_up_options,
                    )
            for i, text, row, by in zip(chunk, texts, rows, served, strict=True):
                s = samples[i]
                results.append(
                    CaseResult(
                        mode=mode,
                        domain=s.domain,
                        kind=s.kind,
                        text=text,
                        seconds=seconds / len(chunk),
                        tokens=int(getattr(row, "tokens", 0)),
                        forwards=int(getattr(row, "nfe", 0)),
                        served=by,
                        **score(s, text, schemas[i]),
                    )
                )
            if progress is not None:
                progress(mode, chunk.stop, len(samples))
    settings = {
        "n": n,
        "seed": seed,
        "split": split,
        "batch_size": batch_size,
        "constrained": constrained,
        "canonical": canonical,
        "copy": copy,
        "copy_within_text": copy_within_text,
        "min_prompt_tokens": min_prompt_tokens,
        "tool_relevance": tool_relevance,
        "tool_similarity": tool_similarity,
        "tool_ranker": tool_ranker,
        "answer_bonus": answer_bonus,
        "argument_fit": argument_fit,
        "split_requests": split_requests,
        "follow_up_calls": follow_up_calls,
        "drop_redundant_calls": drop_redundant_calls,
        "restore_near_copies": restore_near_copies,
        "drop_made_up_options": drop_made_up_options,
        "structured": structured,
        "generation": asdict(config),
        "modes": list(modes),
    }
    return EvalReport(summarize(results), results, settings)


def _shifted(
    session_for: Callable[[int, str | None], Any], start: int, row: int, part: str | None
) -> Any:
    """``session_for`` of a batch's ``row``, the batch starting at case ``start``."""
    return session_for(start + row, part)


def _plain_schema(sample: Sample) -> dict[str, Any]:
    """Unconstrained runs still validate against the action schema when it can be built."""
    try:
        return _action_schema(sample)
    except ImportError:
        return {}


def _rate(values: list[bool]) -> float:
    return round(100.0 * sum(values) / len(values), 1) if values else float("nan")


def summarize(results: Sequence[CaseResult]) -> dict[str, dict[str, dict[str, float]]]:
    """Percentages and latency per mode: overall (``"all"``), per domain, per kind (``"kind:call"``)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for mode in dict.fromkeys(r.mode for r in results):
        rows = [r for r in results if r.mode == mode]
        groups: dict[str, list[CaseResult]] = {"all": rows}
        for r in rows:
            groups.setdefault(r.domain, []).append(r)
        for r in rows:
            groups.setdefault(f"kind:{r.kind}", []).append(r)
        out[mode] = {}
        for name, group in groups.items():
            calls = [r for r in group if r.expects_calls]
            finals = [r for r in group if not r.expects_calls]
            grounded = [r.grounded_final for r in group if r.grounded_final is not None]
            faithful = [r.faithful_final for r in group if r.faithful_final is not None]
            tokens = sum(r.tokens for r in group)
            forwards = sum(r.forwards for r in group)
            served = [r.served == "hybrid" for r in group if r.served is not None]
            out[mode][name] = {
                "cases": len(group),
                "tool_choice": _rate([r.tool_choice for r in calls]),
                "exact_args": _rate([r.exact_args for r in calls]),
                "valid_json": _rate([r.valid_json for r in group]),
                "final_choice": _rate([r.final_choice for r in finals]),
                "grounded_final": _rate(grounded),
                "faithful_final": _rate(faithful),
                "ms_per_step": round(1000 * statistics.mean(r.seconds for r in group), 1),
                "tokens_per_forward": round(tokens / forwards, 2) if forwards else float("nan"),
                "hybrid_served": _rate(served),
                "structured_values": _rate(
                    [r.structured_values for r in group if r.structured_values is not None]
                ),
                "structured_exact": _rate(
                    [r.structured_exact for r in group if r.structured_exact is not None]
                ),
            }
    return out


def format_table(summary: dict[str, dict[str, dict[str, float]]]) -> str:
    """A plain-text table: one row per (mode, group)."""
    cols = (
        "cases",
        "tool_choice",
        "exact_args",
        "valid_json",
        "final_choice",
        "grounded_final",
        "faithful_final",
        "ms_per_step",
        "tokens_per_forward",
        "hybrid_served",
        "structured_values",
        "structured_exact",
    )
    nan = float("nan")  # reports written before a column existed lack it
    head = f"{'mode':<10} {'group':<13} " + " ".join(f"{c:>14}" for c in cols)
    lines = [head, "-" * len(head)]
    for mode, groups in summary.items():
        for domain, m in groups.items():
            lines.append(
                f"{mode:<10} {domain:<13} " + " ".join(f"{m.get(c, nan):>14}" for c in cols)
            )
    return "\n".join(lines)


def write_report(report: EvalReport, path: Path) -> None:
    """Write the report as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_json(), indent=2))
