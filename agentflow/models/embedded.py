"""``EmbeddedModel``: the in-process diffusion engine as a runtime model.

One step: render the conversation with the embedded chat template, compile the
step's action schema into a constraint (once per schema, cached on the model),
decode with the engine — block diffusion by default, autoregressive, hybrid
(diffusion drafts, an AR verifier checks) or ``auto`` — and parse the action. The
constraint makes the action valid for the schema whatever the weights.

Concurrent steps (many runs on one event loop) are collected for a few
milliseconds and decoded in one batched engine call (:class:`StepBatcher`), in a
worker thread so the event loop stays free. Checkpoints load on the first step,
so constructing the model is instant and ``import agentflow`` never touches torch
weights.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import fields, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread

from agentflow.engine.chat_template import compact_json
from agentflow.engine.tool_relevance import check_weight

from ._decoding_defaults import (
    ANSWER_BONUS,
    ARGUMENT_FIT,
    CANONICAL,
    COPY,
    COPY_WITHIN_TEXT,
    DROP_MADE_UP_OPTIONS,
    DROP_REDUNDANT_CALLS,
    FOLLOW_UP_CALLS,
    RESTORE_NEAR_COPIES,
    SECOND_CHOICE,
    SPLIT_REQUESTS,
    TEXT_THRESHOLD,
    TOOL_RANKER,
    TOOL_RELEVANCE,
    TOOL_SIMILARITY,
)
from ._step_decoding import decode_requests, mend_actions
from ._step_jobs import MODES, StepJob, StepOutcome, step_job
from .base import (
    ActionParseError,
    DecodingMode,
    StepDelta,
    StepRequest,
    StepResponse,
    parse_action,
)
from .batcher import StepBatcher

if TYPE_CHECKING:
    from agentflow.engine.constraints.enforcement import Constraint, ConstraintSession
    from agentflow.engine.generation import GenerationConfig
    from agentflow.engine.tool_priors import StepBonuses
    from agentflow.engine.tool_ranker import ToolRanker
    from agentflow.engine.tool_similarity import WordVectors

logger = logging.getLogger(__name__)


def _generation_fields() -> set[str]:
    from agentflow.engine.generation import GenerationConfig

    return {f.name for f in fields(GenerationConfig)}


_PACKAGED_DRAFTER = "agentflow-tiny-dlm"
_PACKAGED_VERIFIER = "agentflow-tiny-ar"


class EmbeddedModel:
    """The embedded diffusion model (default ``agentflow-tiny-dlm``) behind the :class:`Model` protocol.

    ``model``: a packaged model name or a checkpoint folder. ``verifier``: an
    autoregressive checkpoint for ``mode="ar"``, ``"hybrid"`` and ``"auto"``
    (with the packaged drafter, the packaged ``agentflow-tiny-ar`` by default).
    ``mode``: how steps decode unless a step says otherwise; by default ``"auto"``
    when there is a verifier (the packaged drafter brings its own; docs/decisions.md,
    "The packaged pair decodes in auto mode by default"), ``"diffusion"`` otherwise.
    ``generation``: default decoding knobs (:class:`GenerationConfig`); a step's
    ``settings`` may override any of its fields (``temperature``, ``seed``, ...).
    By default greedy steps score a tool name (or an enum value) whole against the
    conversation without its request (``score_choices``, docs/constraints.md), in
    every mode (hybrid output stays the verifier's own), and diffusion steps write
    free text such as copied arguments only where each token is sure
    (``text_threshold``) and may copy a span of the request whole where a string
    value opens (copy choices); every mode's constraint keeps the output on the
    tokenizer's own segmentation (canonical pairs). Where the first call's tool name
    won by a small margin, a diffusion step is decoded again with the runner-up and
    the decode the model is surer of after the name is kept (``second_choice``,
    :mod:`agentflow.engine.second_choice`; ``settings={"second_choice": None}``
    turns it off). ``prompt_cache``: how many recent
    prompts each engine keeps so that a prompt starting the same way reads only its
    new part (docs/engine.md, "Across calls"); None keeps the engines' default (8,
    or ``hybrid_options.prompt_cache``), 0 turns it off in every mode.
    ``tool_relevance``: when a tool name is scored whole, add this weight times the
    tool's word overlap with the request (:mod:`agentflow.engine.tool_relevance`;
    docs/constraints.md, "Tool relevance"); ``tool_similarity``: and this weight times
    its similarity in meaning to the request, read with the word vectors of the
    ``wordllama`` package (:mod:`agentflow.engine.tool_similarity`);
    ``tool_ranker``: and this weight times the packaged tool ranker's score of it,
    learned on the training corpus over the same vectors
    (:mod:`agentflow.engine.tool_ranker`); each favours a
    tool once per step, not again for a parallel call after it. ``answer_bonus``:
    where a request holds no value and comes close to no tool in words or meaning
    ("thanks, bye"), add this to the score of answering over calling a tool. 0
    turns any of them off. ``argument_fit``: on the same choice, take this weight
    from a tool per kind of value the request cannot give it — an e-mail and no
    parameter for one, a required number and no number
    (:mod:`agentflow.engine.argument_fit`), on the steps right after a request.
    ``split_requests``: decode a message that holds several requests ("status of
    2537? plus void ORD-91016") one request at a time, in the same batch, and join
    their calls (:mod:`agentflow.engine.request_parts`). ``follow_up_calls``: where the calls of an action leave a
    part of the request with values untouched ("send me invoice INV-1. downgrade
    cus_457"), decode that part as a request of its own and add its calls to the
    action when they use those values (:mod:`agentflow.engine.call_coverage`).
    ``drop_redundant_calls``: then drop the calls after the first that take no new
    value from the conversation (a repeat, or values of the model's own making)
    where the calls left still serve every part of the request, and the repeats
    of a value a list argument holds more often than the conversation gives it
    (:mod:`agentflow.engine.repeated_items`).
    ``restore_near_copies``: then put back the request's values that a call
    wrote almost right ("11669" for "#86669") where the conversation holds the
    written one nowhere (:mod:`agentflow.engine.near_copies`); then
    ``drop_made_up_options`` drops optional arguments whose values nobody gave
    (:mod:`agentflow.engine.made_up_options`). A step's
    ``settings`` may set any of these too.
    """

    def __init__(
        self,
        model: str | Path = "agentflow-tiny-dlm",
        *,
        verifier: str | Path | None = None,
        mode: DecodingMode | None = None,
        generation: GenerationConfig | None = None,
        device: str = "cpu",
        batch_window_s: float = 0.002,
        max_batch: int = 16,
        hybrid_options: Any = None,
        prompt_cache: int | None = None,
        tool_relevance: float = TOOL_RELEVANCE,
        tool_similarity: float = TOOL_SIMILARITY,
        tool_ranker: float = TOOL_RANKER,
        answer_bonus: float = ANSWER_BONUS,
        argument_fit: float = ARGUMENT_FIT,
        split_requests: bool = SPLIT_REQUESTS,
        follow_up_calls: bool = FOLLOW_UP_CALLS,
        drop_redundant_calls: bool = DROP_REDUNDANT_CALLS,
        restore_near_copies: bool = RESTORE_NEAR_COPIES,
        drop_made_up_options: bool = DROP_MADE_UP_OPTIONS,
    ) -> None:
        if mode is None:
            mode = (
                "auto" if verifier is not None or str(model) == _PACKAGED_DRAFTER else "diffusion"
            )
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        if prompt_cache is not None and prompt_cache < 0:
            raise ValueError(f"prompt_cache must be >= 0, got {prompt_cache}")
        check_weight(tool_relevance, "tool_relevance")
        check_weight(tool_similarity, "tool_similarity")
        check_weight(tool_ranker, "tool_ranker")
        check_weight(answer_bonus, "answer_bonus")
        check_weight(argument_fit, "argument_fit")
        self.model_path = model
        self.verifier_path = verifier
        self.mode: DecodingMode = mode
        self.device = device
        self.hybrid_options = hybrid_options
        self.prompt_cache = prompt_cache
        self.tool_relevance = tool_relevance
        self.tool_similarity = tool_similarity
        self.tool_ranker = tool_ranker
        self.answer_bonus = answer_bonus
        self.argument_fit = argument_fit
        self.split_requests = split_requests
        self.follow_up_calls = follow_up_calls
        self.drop_redundant_calls = drop_redundant_calls
        self.restore_near_copies = restore_near_copies
        self.drop_made_up_options = drop_made_up_options
        self._generation = generation
        self._load_lock = threading.Lock()
        self._constraint_lock = threading.Lock()
        self._loaded: Any = None
        self._verifier: Any = None
        self._vectors: WordVectors | None = None
        self._ranker: ToolRanker | None = None
        self._engines: dict[str, Any] = {}
        self._constraints: dict[str, Constraint] = {}
        self._compiler: Any = None
        self.batcher: StepBatcher[StepJob, StepOutcome] = StepBatcher(
            self._run_batch, window_s=batch_window_s, max_batch=max_batch
        )

    @property
    def name(self) -> str:
        return Path(str(self.model_path)).name

    # -- loading (worker thread) -----------------------------------------------------------------

    def load(self) -> None:
        """Load the checkpoint(s) now (otherwise the first step does), and the word
        vectors when ``tool_similarity`` or ``answer_bonus`` is on (otherwise the first
        step with tools does)."""
        self._load_checkpoints()
        if self.tool_similarity > 0 or self.answer_bonus > 0:
            self._word_vectors()
        if self.tool_ranker > 0:
            self._tool_ranker()

    def _load_checkpoints(self) -> None:
        with self._load_lock:
            if self._loaded is None:
                from agentflow.engine.checkpoints import load_checkpoint

                loaded = load_checkpoint(self.model_path, device=self.device)
                if self.verifier_path is not None:
                    self._verifier = load_checkpoint(self.verifier_path, device=self.device)
                self._loaded = loaded

    def _word_vectors(self) -> WordVectors:
        with self._load_lock:
            if self._vectors is None:
                from agentflow.engine.tool_similarity import WordVectors

                self._vectors = WordVectors.load()
            return self._vectors

    def _tool_ranker(self) -> ToolRanker:
        vectors = self._word_vectors()
        with self._load_lock:
            if self._ranker is None:
                from agentflow.engine.tool_ranker import ToolRanker

                self._ranker = ToolRanker.load(vectors=vectors)
            return self._ranker

    def _load_default_verifier(self) -> None:
        """The packaged drafter comes with the packaged verifier: load it on first need."""
        with self._load_lock:
            if self._verifier is None and str(self.model_path) == _PACKAGED_DRAFTER:
                from agentflow.engine.checkpoints import load_checkpoint

                self._verifier = load_checkpoint(_PACKAGED_VERIFIER, device=self.device)

    @property
    def tokenizer(self) -> Any:
        self._load_checkpoints()
        return self._loaded.tokenizer

    def _engine(self, mode: str) -> Any:
        if mode in self._engines:
            return self._engines[mode]
        loaded = self._loaded
        causal = loaded.config.attention == "causal"
        if mode == "diffusion" and not causal:
            from agentflow.engine.sampler import DiffusionEngine

            engine: Any = DiffusionEngine(loaded.model, loaded.tokenizer, **self._cache_kwargs())
        elif mode == "ar" or (mode == "diffusion" and causal):
            from agentflow.engine.autoregressive import ARDecoder

            if not causal:
                self._load_default_verifier()
            source = self._verifier if self._verifier is not None else loaded
            if source.config.attention == "bidirectional":
                raise ValueError(
                    f"mode 'ar' needs an autoregressive checkpoint; pass verifier=... ({source.path} is bidirectional)"
                )
            engine = ARDecoder(source.model, source.tokenizer, **self._cache_kwargs())
        else:  # hybrid / auto
            self._load_default_verifier()
            if self._verifier is None:
                raise ValueError(
                    f"mode {mode!r} needs an autoregressive verifier: EmbeddedModel(verifier=...) or HybridModel()"
                )
            from agentflow.engine.hybrid import HybridEngine, HybridOptions

            options = self.hybrid_options
            if self.prompt_cache is not None:
                options = replace(options or HybridOptions(), prompt_cache=self.prompt_cache)
            engine = HybridEngine(
                loaded.model,
                self._verifier.model,
                loaded.tokenizer,
                verifier_tokenizer=self._verifier.tokenizer,
                options=options,
            )
        self._engines[mode] = engine
        return engine

    def _cache_kwargs(self) -> dict[str, int]:
        return {} if self.prompt_cache is None else {"prompt_cache": self.prompt_cache}

    def constraint(self, schema: dict[str, Any]) -> Constraint:
        """The compiled constraint of ``schema`` (compiled once per model instance)."""
        key = compact_json(schema)
        with self._constraint_lock:
            found = self._constraints.get(key)
            if found is None:
                from agentflow.engine.constraints import ConstraintCompiler
                from agentflow.engine.constraints.enforcement import Constraint

                if self._compiler is None:
                    from agentflow.engine.constraints import AutomatonStore

                    self._compiler = ConstraintCompiler(store=AutomatonStore.default())
                compiled = self._compiler.compile_schema(schema, self.tokenizer)
                found = Constraint(compiled.automaton, self.tokenizer)
                self._constraints[key] = found
            return found

    # -- decoding (worker thread) ----------------------------------------------------------------

    def _config(self, settings: dict[str, Any]) -> GenerationConfig:
        """Decoding knobs: the model's defaults (block length from the checkpoint) + step settings."""
        from agentflow.engine.generation import GenerationConfig

        base = self._generation or GenerationConfig(
            max_new_tokens=256,
            block_length=self._loaded.config.block_length,
            score_choices=True,
            text_threshold=TEXT_THRESHOLD,
            second_choice=SECOND_CHOICE,
        )
        known = _generation_fields()
        unknown = sorted(set(settings) - known)
        if unknown:
            logger.debug("EmbeddedModel ignores settings it does not know: %s", unknown)
        return replace(base, **{k: v for k, v in settings.items() if k in known})

    def _run_batch(self, jobs: list[StepJob]) -> list[StepOutcome | Exception]:
        """Decode jobs of one mode and config (runs in a worker thread): their
        requests one at a time where a message holds several, the follow-up calls
        their actions owe, then the checks on the calls."""
        self._load_checkpoints()
        config = self._config(jobs[0].settings)
        mode = jobs[0].mode
        failed: dict[int, Exception] = {}
        sessions: list[Any] = []
        ready: list[StepJob] = []
        for job in jobs:
            # Built here, not when the flow first needs it, so that what a session
            # needs (the schema compiled, the word vectors) fails this job only; a
            # job decoded by its parts does not use it.
            try:
                sessions.append(self._session(job, config))
                ready.append(job)
            except Exception as exc:  # a schema the engine cannot enforce fails this job only
                failed[id(job)] = exc
        done: dict[int, StepOutcome] = {}
        if ready:
            engine, tokenizer = self._engine(mode), self._loaded.tokenizer
            new_session = partial(self._session, config=config)
            done = decode_requests(
                engine, tokenizer, ready, sessions, config, mode, self.name, new_session
            )
            mend_actions(ready, done)
        return [done[id(j)] if id(j) in done else failed[id(j)] for j in jobs]

    def _session(self, job: StepJob, config: GenerationConfig) -> ConstraintSession:
        """A constraint session for ``job`` with its copy sources and bonuses."""
        session = self.constraint(job.schema).session(config.max_new_tokens, canonical=CANONICAL)
        if COPY:
            session.copy_from(job.sources, within_text=COPY_WITHIN_TEXT)
        self._bonuses(job).apply(session)
        return session

    def _bonuses(self, job: StepJob) -> StepBonuses:
        """The step's tool-name and key bonuses (:mod:`agentflow.engine.tool_priors`)."""
        from agentflow.engine.chat_template import called_since_request
        from agentflow.engine.tool_priors import step_bonuses

        needs_vectors = bool(job.tools) and (job.similarity > 0 or job.answer > 0)
        needs_ranker = len(job.tools) > 1 and job.ranker > 0
        return step_bonuses(
            job.request,
            job.tools,
            relevance_weight=job.relevance,
            similarity_weight=job.similarity,
            answer_bonus=job.answer,
            vectors=self._word_vectors() if needs_vectors else None,
            ranker=self._tool_ranker() if needs_ranker else None,
            ranker_weight=job.ranker if needs_ranker else 0.0,
            fit_weight=job.fit if job.follows_request else 0.0,
            called=called_since_request(job.step.messages) if job.step is not None else None,
        )

    # -- the Model protocol ----------------------------------------------------------------------

    def _job(self, request: StepRequest, on_text: Callable[[str], None] | None) -> StepJob:
        return step_job(
            request,
            on_text,
            mode=request.mode or self.mode,
            tool_relevance=self.tool_relevance,
            tool_similarity=self.tool_similarity,
            tool_ranker=self.tool_ranker,
            answer_bonus=self.answer_bonus,
            argument_fit=self.argument_fit,
            split_requests=self.split_requests,
            follow_up_calls=self.follow_up_calls,
            drop_redundant_calls=self.drop_redundant_calls,
            restore_near_copies=self.restore_near_copies,
            drop_made_up_options=self.drop_made_up_options,
        )

    async def _submit(self, job: StepJob) -> StepOutcome:
        key = (job.mode, job.reason, compact_json(job.settings))
        outcome, _ = await self.batcher.submit(job, key=key)
        return outcome

    def _response(self, outcome: StepOutcome, started: float) -> StepResponse:
        try:
            action = parse_action(outcome.text)
        except ActionParseError as exc:
            # Only possible when the token budget ran out mid-action.
            raise ActionParseError(
                f"{exc} (the action was cut off at max_new_tokens?)", text=outcome.text
            ) from exc
        outcome.usage.seconds = time.perf_counter() - started
        return StepResponse(action=action, text=outcome.text, usage=outcome.usage)

    async def step(self, request: StepRequest) -> StepResponse:
        started = time.perf_counter()
        return self._response(await self._submit(self._job(request, None)), started)

    async def stream_step(self, request: StepRequest) -> AsyncIterator[StepDelta | StepResponse]:
        started = time.perf_counter()
        send, receive = anyio.create_memory_object_stream[str](math.inf)

        def on_text(text: str) -> None:  # called from the worker thread
            anyio.from_thread.run_sync(send.send_nowait, text)

        job = self._job(request, on_text)
        box: dict[str, StepOutcome] = {}

        async def work() -> None:
            async with send:
                box["outcome"] = await self._submit(job)

        async with anyio.create_task_group() as tg:
            tg.start_soon(work)
            async with receive:
                async for text in receive:
                    yield StepDelta(text=text)
        yield self._response(box["outcome"], started)
