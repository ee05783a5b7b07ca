"""The verifier's side of hybrid decoding: one forward pass per round, then the walk.

:meth:`Verifier.verify` forwards [tokens the verifier has not seen + the draft]
through its causal KV cache and walks the draft the way :class:`ARDecoder`
decodes: its own token at each position (greedy: :func:`~.speculative.greedy_pick`,
the call :class:`ARDecoder` makes; sampling: :func:`~.speculative.speculative_step`),
the constraint's forced tokens after it, on while the draft agrees.
:meth:`Verifier.keep` then truncates the cache to the kept draft prefix. With
an empty draft (:data:`NO_DRAFT`) a round is one plain autoregressive step.
The constraint's masks and forced runs a one-pass draft computed on the way
are reused while the walk agrees with the draft (same prefix, same answer).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .autoregressive import causal_forward
from .choice_scoring import ChoicePrior, ChoiceQuery, choose, supports_choices
from .constraints.closed_choices import ClosedChoice
from .constraints.copy_choices import likeliest_starts
from .constraints.protocol import ChoiceConstraint, DecodeConstraint
from .decode_batch import Segment
from .drafting import Draft, grow_cache
from .errors import InfeasibleConstraintError
from .generation import GenerationConfig
from .model import KVCache, Transformer
from .prefix_store import PrefixStore
from .speculative import fit_mask, greedy_pick, sample, speculative_step, target_probs

#: A verifier-only step: the walk over an empty draft is one autoregressive step.
NO_DRAFT = Draft(tokens=[], probs=[])


@dataclass
class VerifyRound:
    """What one verify round emitted (raw, end token included) and whether the request is done."""

    tokens: list[int]
    finished: bool
    #: Per emitted token, whether the constraint forced it.
    forced: list[bool]
    #: Forward passes beyond the round's scoring pass (closed choices and their prior).
    passes: int = 0


class Verifier:
    """One request's verifier: its KV cache, the tokens it has not forwarded yet, the round walk."""

    def __init__(
        self,
        model: Transformer,
        prompt: list[int],
        capacity: int = 0,
        store: PrefixStore | None = None,
    ) -> None:
        """``capacity``: cache positions to allocate up front (it grows when exceeded).
        ``store``: earlier prompts' keys and values; the longest prefix of ``prompt``
        found there is copied in, and the prompt is kept there once read."""
        self.model = model
        dev = next(model.parameters()).device
        dtype = next(model.parameters()).dtype
        size = max(capacity, len(prompt) + 64)
        self.cache = KVCache(model.config, 1, size, device=dev, dtype=dtype)
        reused = store.fill(self.cache, prompt, len(prompt) - 1) if store is not None else 0
        self.unseen: list[int] = list(prompt[reused:])
        self.position = reused  # position of unseen[0]
        #: Prompt tokens copied from the store.
        self.cached_tokens = reused
        self._prompt = list(prompt)
        self._store = store
        self._scored = False

    @property
    def prefilled(self) -> bool:
        """Whether the prompt is in the cache (the first forward pass, the prefill, is done)."""
        return self._scored

    def score(self, draft: list[int]) -> Tensor:
        """Logits fp32 [len(draft) + 1, V]: row j predicts the token after ``unseen + draft[:j]``."""
        seq = self.unseen + draft
        grow_cache(self.cache, self.cache.length + len(seq))
        dev = self.cache.k.device
        positions = (self.position + torch.arange(len(seq), device=dev)).unsqueeze(0)
        seg = Segment(
            torch.tensor([seq], dtype=torch.long, device=dev),
            positions,
            positions.clone(),
            torch.ones(1, len(seq), dtype=torch.bool, device=dev),
        )
        hidden = causal_forward(self.model, self.cache, seg, hidden_only=True)[0]
        if not self._scored:
            self._scored = True
            if self._store is not None:  # the cache now starts with the whole prompt
                self._store.save(self.cache, self._prompt)
        # Only the last unseen token and the draft need vocabulary logits.
        return self.model.project(hidden[len(self.unseen) - 1 :]).float()

    def keep(self, draft: list[int], emitted: list[int]) -> int:
        """Roll the cache back to the draft prefix the round kept; return its length."""
        kept = 0
        while kept < min(len(draft), len(emitted)) and draft[kept] == emitted[kept]:
            kept += 1
        if kept < len(draft):
            self.cache.truncate(self.cache.length - len(draft) + kept)
        self.position += len(self.unseen) + kept
        self.unseen = emitted[kept:]
        return kept

    def verify(
        self,
        draft: Draft,
        c: DecodeConstraint | None,
        config: GenerationConfig,
        gen: torch.Generator,
        done_len: int,
        budget: int,
        prior: ChoicePrior | None = None,
    ) -> VerifyRound:
        """Walk the draft as the verifier would decode; advance ``c`` over what is emitted.

        Greedy with ``config.score_choices``, a closed choice is made whole the way
        :class:`ARDecoder` makes it (:meth:`_choose`), calibrated by ``prior``.
        """
        logits = self.score(draft.tokens)
        vocab = logits.shape[-1]
        greedy = config.temperature == 0.0
        choosing = (
            greedy
            and config.score_choices
            and isinstance(c, ChoiceConstraint)
            and supports_choices(self.model)
        )
        ends = self.model.config.end_token_ids
        emitted: list[int] = []
        flags: list[bool] = []
        passes = 0
        j = 0
        n = len(draft.tokens)
        # Every row's unmasked argmax at once; a position's pick is that unless it is masked out.
        tops = logits.argmax(dim=-1).tolist() if greedy else []
        while True:
            choice = (
                c.next_choice(budget - done_len - len(emitted))  # type: ignore[union-attr]
                if choosing
                else None
            )
            picked: tuple[int, ...] | None = None
            if choice is not None:
                picked, used = self._choose(choice, logits[j], j, n, prior, emitted, config)
                passes += used
            if picked is not None:
                main = list(picked)
                hit = draft.tokens[j : j + len(main)] == main
            else:  # no choice here, or a declined copy choice: the position's own token
                mask = draft.masks.get(j) if j < n else None
                if mask is None and c is not None:
                    mask = c.next_token_mask()
                if mask is not None:
                    mask = fit_mask(mask.to(logits.device), vocab)
                if greedy:
                    tok = greedy_pick(
                        logits[j], mask, tops[j], c.refused_pick if c is not None else None
                    )
                    hit = j < n and draft.tokens[j] == tok
                else:
                    p = target_probs(
                        logits[j], temperature=config.temperature, top_p=config.top_p, allowed=mask
                    )
                    if j < n:
                        verdict = speculative_step(p, draft.probs[j], draft.tokens[j], gen)
                        tok, hit = verdict.token, verdict.accepted
                    else:
                        tok, hit = sample(p, gen), False
                if tok < 0:
                    raise InfeasibleConstraintError("no token is allowed after the prefix")
                main = [tok]
            forced: list[int] = []
            if c is not None:
                c.advance(main)
                if not c.done and main[-1] not in ends:
                    run = draft.forced_after.get(j) if hit and picked is None else None
                    if run is None:
                        run = c.forced_tokens()
                    forced = run[: budget - done_len - len(emitted) - len(main)]
                    if forced:
                        c.advance(forced)
            piece = main + forced
            emitted += piece
            flags += [False] * len(main) + [True] * len(forced)
            if (
                not ends.isdisjoint(piece)
                or (c is not None and c.done)
                or done_len + len(emitted) >= budget
            ):
                return VerifyRound(emitted, True, flags, passes)
            if not hit:
                return VerifyRound(emitted, False, flags, passes)
            j += len(main)
            if forced:
                if draft.tokens[j : j + len(forced)] != forced:
                    return VerifyRound(emitted, False, flags, passes)
                j += len(forced)

    def _choose(
        self,
        choice: ClosedChoice,
        logits: Tensor,
        j: int,
        n: int,
        prior: ChoicePrior | None,
        emitted: list[int],
        config: GenerationConfig,
    ) -> tuple[tuple[int, ...] | None, int]:
        """The candidate :class:`ARDecoder` would choose after ``unseen + draft[:j]`` (None:
        a copy choice it declines), and the forward passes it took."""
        if len(choice.candidates) == 1 and not choice.copy:
            return choice.candidates[0].tokens, 0
        first = logits.log_softmax(-1)
        if choice.copy:
            choice = likeliest_starts(choice, first)
            if not choice.candidates:
                return None, 0  # a copy inside free text that the model is not writing
        dev = self.cache.k.device
        empty = Segment.empty(dev)
        prefix = self.cache.length - n + j  # the cache holds unseen + the whole draft
        query = ChoiceQuery(0, choice, empty, self.position + len(self.unseen) + j, first)
        before = prior.passes if prior is not None else 0
        given = [(prior, emitted)] if prior is not None else None
        (res,) = choose(
            self.model, self.cache, [query], given, config.choice_prior_weight, length=prefix
        )
        after = prior.passes if prior is not None else 0
        return (None if res is None else res.candidate.tokens), 1 + after - before
