"""Hybrid decoding: a diffusion model drafts, an autoregressive model verifies.

Each round the drafter proposes the next block (:mod:`.drafting`); the verifier
(:mod:`.verification`)
forwards [tokens it has not seen yet + the draft] through its causal KV cache in
one pass and walks the draft left to right, exactly as :class:`ARDecoder` would
decode: at each position it picks its own token (greedy: ``greedy_pick``;
sampling: the speculative-sampling rule of :mod:`.speculative`), appends the
constraint's forced tokens after it, and goes on while the draft agrees. At the
first disagreement (or after the whole draft) its own token ends the round.
Both caches then hold exactly the kept prefix: the verifier's is truncated, the
drafter never cached the draft. The draft length follows the recent acceptance.
While drafting does not pay (:mod:`.hybrid_schedule`: the tokens a round keeps
against the measured cost of a draft, a verify and a verifier-only step) the
verifier decodes alone, one step per token, and drafting is probed again later.

Greedy hybrid output is token-for-token the verifier's own greedy output (under
the same constraint); sampled output has the verifier's distribution.

``mode="auto"`` decodes by diffusion alone and re-does the request in hybrid
mode when a committed token's confidence falls under ``min_confidence`` or the
constraint reports an infeasible block; a caller (the runtime, when pydantic
rejects the parsed action) re-does a step with ``mode="hybrid", reason=...``.
The stats say which mode served each request and why.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import torch

from .checkpoints import load_checkpoint
from .choice_scoring import ChoicePrior, ChoicePriors, choice_prior_list
from .constraints.protocol import DecodeConstraint
from .decode_batch import (
    Constraints,
    Prompts,
    check_context,
    constraint_list,
    encode_prompts,
)
from .drafting import Draft, Drafter
from .errors import InfeasibleConstraintError, TokenizerMismatchError
from .generation import (
    BlockCallback,
    GenerationConfig,
    GenerationResult,
    RowStats,
    end_index,
)
from .hybrid_options import HybridOptions
from .hybrid_schedule import DraftLength, Scheduler
from .hybrid_stats import HybridStats, ServedMode
from .model import Transformer
from .prefix_store import PrefixStore
from .sampler import DiffusionEngine
from .tokenizer import Tokenizer, check_same_tokenizer
from .verification import NO_DRAFT, Verifier

HybridMode = Literal["hybrid", "diffusion", "auto"]
#: Receives a request's newly settled tokens (end token excluded).
_Emit = Callable[[list[int]], None]
_VERIFIER_FORMATS = ("agentflow", "llama", "qwen2")


class HybridEngine:
    """Diffusion drafts, autoregressive verification; also serves ``mode="auto"``."""

    def __init__(
        self,
        drafter: Transformer,
        verifier: Transformer,
        tokenizer: Tokenizer | None = None,
        *,
        verifier_tokenizer: Tokenizer | None = None,
        options: HybridOptions | None = None,
    ) -> None:
        dcfg, vcfg = drafter.config, verifier.config
        if dcfg.attention == "causal" or dcfg.mask_token_id is None:
            raise ValueError("the drafter must be a diffusion model with a mask token")
        if vcfg.attention == "bidirectional":
            raise ValueError("the verifier must be autoregressive (causal or block attention)")
        if tokenizer is not None and verifier_tokenizer is not None:
            check_same_tokenizer(tokenizer, verifier_tokenizer)
        if dcfg.end_token_ids != vcfg.end_token_ids:
            raise TokenizerMismatchError(
                f"drafter end tokens {sorted(dcfg.end_token_ids)} differ from the verifier's"
                f" {sorted(vcfg.end_token_ids)}"
            )
        self.drafter = drafter.eval()
        self.verifier = verifier.eval()
        self.tokenizer = tokenizer
        self.options = options or HybridOptions()
        #: Recent prompts' keys and values per model (None: off, or a bidirectional drafter).
        self.drafter_prompts = PrefixStore.for_model(self.drafter, self.options.prompt_cache)
        self.verifier_prompts = PrefixStore.for_model(self.verifier, self.options.prompt_cache)
        #: ``mode="diffusion"`` and ``"auto"``: the drafter decodes the batch by itself,
        #: through the same prompt store as its drafts.
        self.diffusion = DiffusionEngine(
            self.drafter, tokenizer, prompt_cache=0, prompt_store=self.drafter_prompts
        )
        #: Draft or verify alone, round by round; what it measured is shared by the requests.
        self.scheduler = Scheduler(
            adaptive=self.options.adaptive,
            first_interval=self.options.probe_interval,
            max_interval=self.options.max_probe_interval,
        )

    @classmethod
    def from_pretrained(
        cls,
        drafter: str | Path = "agentflow-tiny-dlm",
        verifier: str | Path = "agentflow-tiny-ar",
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype | None = None,
        options: HybridOptions | None = None,
    ) -> HybridEngine:
        """Load both checkpoints (packaged names or local folders) and check their tokenizers."""
        d = load_checkpoint(drafter, device=device, dtype=dtype)
        v = load_checkpoint(verifier, device=device, dtype=dtype)
        if v.format not in _VERIFIER_FORMATS:
            raise ValueError(
                f"verifier {v.path} is a {v.format!r} checkpoint; the verifier must be one of "
                f"{', '.join(_VERIFIER_FORMATS)}"
            )
        return cls(d.model, v.model, d.tokenizer, verifier_tokenizer=v.tokenizer, options=options)

    @property
    def end_ids(self) -> frozenset[int]:
        return self.verifier.config.end_token_ids

    @torch.inference_mode()
    def generate(
        self,
        prompts: Prompts,
        config: GenerationConfig | None = None,
        *,
        constraints: Constraints = None,
        mode: HybridMode = "hybrid",
        reason: str = "requested",
        on_block: BlockCallback | None = None,
        choice_priors: ChoicePriors = None,
    ) -> GenerationResult:
        """Decode a prompt or a batch in ``mode``; stats are :class:`HybridStats`.

        Diffusion (``"diffusion"``, and ``"auto"``'s first attempt) decodes the batch's
        rows together; draft/verify rounds go row by row.

        ``reason`` labels hybrid requests in the stats (e.g. ``"validation: ..."``
        when the runtime re-does a step whose action pydantic rejected). In
        ``auto`` mode ``on_block`` receives each row's output once it is settled.
        ``config.score_choices`` (with ``choice_priors``) applies to every mode:
        the drafter makes closed choices in diffusion steps, the verifier in
        draft/verify rounds exactly as :class:`ARDecoder` makes them, so greedy
        hybrid output stays the AR model's own.
        """
        if mode not in ("hybrid", "diffusion", "auto"):
            raise ValueError(f"mode must be 'hybrid', 'diffusion' or 'auto', got {mode!r}")
        config = config or GenerationConfig()
        t0 = time.perf_counter()
        ids = encode_prompts(prompts, self.tokenizer)
        cons = constraint_list(constraints, len(ids))
        max_len = min(self.drafter.config.max_seq_len, self.verifier.config.max_seq_len)
        budgets = check_context(ids, max_len, config.max_new_tokens)
        verifier_priors = choice_prior_list(
            self.verifier, choice_priors, ids, config, self.tokenizer
        )
        stats = HybridStats(mode=mode, rows=[RowStats(prompt_tokens=len(p)) for p in ids])
        if mode == "hybrid":
            out: list[list[int]] = []
            for r, prompt in enumerate(ids):
                seq = self._hybrid(
                    prompt,
                    cons[r],
                    config,
                    budgets[r],
                    config.row_seed(r),
                    stats,
                    stats.rows[r],
                    _row_emitter(on_block, r),
                    verifier_priors[r],
                )
                out.append(seq)
                stats.served.append(ServedMode("hybrid", reason))
        else:
            out = self._diffusion_first(
                ids, cons, config, budgets, stats, mode, on_block, choice_priors, verifier_priors
            )
        stats.tokens = sum(len(s) for s in out)
        stats.forced_tokens = sum(rs.forced_tokens for rs in stats.rows)
        stats.nfe = stats.draft_nfe + stats.verify_nfe
        modes = {s.mode for s in stats.served}
        stats.mode = modes.pop() if len(modes) == 1 else mode
        stats.seconds = time.perf_counter() - t0
        texts = [self.tokenizer.decode(s) for s in out] if self.tokenizer is not None else None
        return GenerationResult(out, stats, texts)

    def _diffusion_first(
        self,
        ids: list[list[int]],
        cons: list[DecodeConstraint | None],
        config: GenerationConfig,
        budgets: list[int],
        stats: HybridStats,
        mode: HybridMode,
        on_block: BlockCallback | None,
        choice_priors: ChoicePriors,
        verifier_priors: list[ChoicePrior | None],
    ) -> list[list[int]]:
        """Block diffusion for every row in one batch; in ``auto`` mode a row the drafter
        was unsure of, or whose constraint found a block infeasible, is re-done in hybrid
        mode (after the blocks it was sure of, with ``keep_confident``)."""
        bound = self.options.min_confidence if mode == "auto" else None
        snapshots = [c.checkpoint() if c is not None else None for c in cons]
        attempts = self._diffuse(
            ids,
            cons,
            snapshots,
            config,
            bound,
            on_block if bound is None else None,
            choice_priors,
            stats,
        )
        out: list[list[int]] = []
        for r, (seq, row, why) in enumerate(attempts):
            stats.rows[r] = row
            if why is None:
                stats.path_tokens["diffusion"] += len(seq)
                if bound is not None and on_block is not None and seq:
                    on_block(r, seq)
                out.append(seq)
                stats.served.append(
                    ServedMode("diffusion", "requested" if bound is None else "confident")
                )
                continue
            kept = seq if self.options.keep_confident else []
            c = cons[r]
            if c is not None:
                c.rollback(snapshots[r])  # a clean session state, then the kept blocks again
                c.advance(kept)
            row.finished = False
            if kept:
                stats.path_tokens["diffusion"] += len(kept)
                if verifier_priors[r] is not None:
                    verifier_priors[r].extend(kept)  # type: ignore[union-attr]
                if on_block is not None:
                    on_block(r, kept)
            else:
                row.forced_tokens = 0
            rest = self._hybrid(
                ids[r] + kept,
                c,
                config,
                budgets[r] - len(kept),
                config.row_seed(r),
                stats,
                row,
                _row_emitter(on_block, r),
                verifier_priors[r],
            )
            row.tokens = len(kept) + len(rest)
            out.append(kept + rest)
            stats.served.append(ServedMode("hybrid", why, diffusion_tokens=len(kept)))
        return out

    def _diffuse(
        self,
        ids: list[list[int]],
        cons: list[DecodeConstraint | None],
        snapshots: list[Any],
        config: GenerationConfig,
        bound: float | None,
        on_block: BlockCallback | None,
        choice_priors: ChoicePriors,
        stats: HybridStats,
    ) -> list[tuple[list[int], RowStats, str | None]]:
        """Each row's diffusion output, its stats and why it must be re-done (None: it
        need not), the rows decoded as one batch. A block infeasible under some row's
        constraint stops the batch; then (``bound`` set) each row is decoded alone, so
        that only that row is re-done. ``snapshots``: each session's checkpoint before."""
        try:
            res = self.diffusion.generate(
                ids,
                config,
                constraints=cons,
                on_block=on_block,
                choice_priors=choice_priors,
                min_confidence=bound,
            )
        except InfeasibleConstraintError as exc:
            if bound is None:
                raise
            if len(ids) == 1:
                return [([], RowStats(prompt_tokens=len(ids[0])), f"infeasible: {exc}")]
            for c, snapshot in zip(cons, snapshots, strict=True):
                if c is not None:
                    c.rollback(snapshot)
            alone: list[tuple[list[int], RowStats, str | None]] = []
            for r in range(len(ids)):
                prior = None if choice_priors is None else [choice_priors[r]]
                row_config = replace(config, seed=config.row_seed(r))
                alone += self._diffuse(
                    [ids[r]], [cons[r]], [snapshots[r]], row_config, bound, None, prior, stats
                )
            return alone
        stats.draft_nfe += res.stats.nfe
        return [
            (
                seq,
                row,
                None
                if row.low_confidence is None
                else f"low_confidence: {row.low_confidence:.3f} < {bound}",
            )
            for seq, row in zip(res.sequences, res.stats.rows, strict=True)
        ]

    def _text(self, tokens: list[int]) -> list[int]:
        cut = end_index(tokens, self.end_ids)
        return tokens if cut is None else tokens[:cut]

    def _hybrid(
        self,
        prompt: list[int],
        c: DecodeConstraint | None,
        config: GenerationConfig,
        budget: int,
        seed: int | None,
        stats: HybridStats,
        row: RowStats,
        emit: _Emit | None,
        prior: ChoicePrior | None = None,
    ) -> list[int]:
        """The draft/verify loop for one request; verifier-only steps while drafting does not pay.

        ``prior`` (read by the verifier) calibrates closed choices under
        ``config.score_choices``, as in :class:`ARDecoder`.
        """
        gen = torch.Generator().manual_seed(
            seed if seed is not None else int(torch.randint(0, 2**62, (1,)))
        )
        first = c.forced_tokens()[:budget] if c is not None else []
        if first:
            c.advance(first)  # type: ignore[union-attr]
        if prior is not None:
            prior.extend(first)
        out = self._text(first)
        row.forced_tokens += len(out)
        stats.path_tokens["constraint"] += len(out)
        if out and emit is not None:
            emit(out)
        if len(out) < len(first) or (c is not None and c.done) or len(out) >= budget:
            row.finished = len(out) < len(first) or (c is not None and c.done)
            row.tokens = len(out)
            return out
        opts = self.options
        top = opts.max_draft or config.block_length
        room = len(prompt) + budget + top + 2
        drafter = Drafter(self.drafter, prompt, capacity=room, store=self.drafter_prompts)
        drafter.accept(first)
        verifier = Verifier(
            self.verifier, prompt + first, capacity=room, store=self.verifier_prompts
        )
        schedule = self.scheduler
        lengths = DraftLength(
            schedule.draft_length or config.block_length, min(opts.min_draft, top), top
        )
        clock = opts.clock
        k = chosen = 0  # drafts, model-chosen tokens
        while True:
            left = budget - len(out)
            # A draft needs room for the verifier's own token after it.
            length = min(lengths.length, left - 1)
            prefilled = verifier.prefilled  # the prefill's time is not a step's cost
            warm = drafter.drafts > 0
            if length >= 1 and schedule.draft_next(cold=not warm, chosen=chosen):
                t0 = clock()
                draft = self._draft(drafter, length, c, config, seed, k, gen, left)
                t1 = clock()
                rnd = verifier.verify(draft, c, config, gen, len(out), budget, prior)
                t2 = clock()
                kept = verifier.keep(draft.tokens, rnd.tokens)
                schedule.after_round(
                    rnd.forced.count(False), t1 - t0, t2 - t1 if prefilled else None, cold=not warm
                )
                lengths.update(len(draft.tokens), kept)
                stats.draft_nfe += draft.nfe
                stats.draft_rounds += 1
                stats.drafted_tokens += len(draft.tokens)
                stats.accepted_tokens += kept
                row.nfe += draft.nfe + 1
                path = "draft"
                k += 1
            else:
                t0 = clock()
                rnd = verifier.verify(NO_DRAFT, c, config, gen, len(out), budget, prior)
                verifier.keep([], rnd.tokens)
                schedule.after_ar_step(clock() - t0 if prefilled else None)
                stats.ar_steps += 1
                row.nfe += 1
                path = "ar"
            stats.verify_nfe += 1 + rnd.passes
            row.nfe += rnd.passes
            if prior is not None:
                prior.extend(rnd.tokens)
            chosen += rnd.forced.count(False)
            text = self._text(rnd.tokens)
            out += text
            stats.path_tokens[path] += len(text)
            row.forced_tokens += sum(rnd.forced[: len(text)])
            if text and emit is not None:
                emit(text)
            if rnd.finished:
                row.finished = len(text) < len(rnd.tokens) or (c is not None and c.done)
                break
            drafter.accept(rnd.tokens)
        schedule.draft_length = lengths.length
        schedule.end_request(chosen)
        row.tokens = len(out)
        # The model whose output this is; prompt tokens only (it also read forced ones).
        row.cached_tokens = min(verifier.cached_tokens, row.prompt_tokens)
        return out

    def _draft(
        self,
        drafter: Drafter,
        length: int,
        c: DecodeConstraint | None,
        config: GenerationConfig,
        seed: int | None,
        k: int,
        gen: torch.Generator,
        budget_left: int,
    ) -> Draft:
        """The next draft; an infeasible block gives an empty draft (the verifier then decodes alone)."""
        try:
            steps = self.options.draft_steps
            if config.temperature > 0.0 or steps == 1:
                return drafter.parallel(length, c, config, gen, budget_left)
            # Drafts stay token by token: the verifier makes closed choices itself.
            config = replace(config, score_choices=False)
            if steps is not None:  # a fixed schedule: every draft costs ``steps`` passes
                config = replace(config, steps=steps, threshold=None)
            return drafter.denoise(length, c, config, seed=seed, block_index=k)
        except InfeasibleConstraintError:
            drafter.cancel()
            return Draft(tokens=[], probs=[], nfe=1)


def _row_emitter(on_block: BlockCallback | None, row: int) -> _Emit | None:
    """``on_block`` bound to batch row ``row``."""
    return None if on_block is None else (lambda tokens: on_block(row, tokens))
