"""Scoring a closed choice's candidates whole, in one batched forward pass.

A decoder that meets a closed choice (:mod:`.constraints.closed_choices`) asks
:func:`choose` for the candidate with the highest log-probability. Every
request becomes one row (:mod:`.choice_trie`): its tokens that are not in its
KV cache yet (``context``), then its candidates' tokens as a trie, each seeing
the context and its own earlier tokens causally (block id = position), so the
output before each candidate token predicts it — the autoregressive reading,
which is also how a shifted (``logits_shift=1``) diffusion model was
initialized and reads its block's clean prefix. The request's cache row is
copied once for the pass; nothing is added to the caller's cache.

A small model rates an unfamiliar name low whatever the request says, so a
plain sequence score prefers the names whose words it has seen. With a
:class:`ChoicePrior` — the same conversation *without* the request — a value
choice (a tool name, an enum value; not an object key) is scored by how much
the request raises each candidate: ``log p(c | prompt) - w * log p(c | prior)``
(``GenerationConfig.choice_prior_weight``), the domain-conditional PMI of
Holtzman et al. (2021, "Surface form competition").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from .choice_trie import CandidateTrie, trie_inputs
from .constraints.closed_choices import Candidate, ClosedChoice
from .constraints.copy_choices import COPY_MIN_CLOSE, NUMBER_MIN_CLOSE
from .constraints.word_copies import WORD_MIN_CLOSE
from .decode_batch import Segment
from .generation import GenerationConfig
from .model import KVCache, Transformer
from .tokenizer import Tokenizer

#: ``generate``'s ``choice_priors``: one per prompt (text or token ids), None where there is none.
ChoicePriors = Sequence[str | Sequence[int] | None] | None


@dataclass
class ChoiceQuery:
    """One request's closed choice."""

    #: The request's row in the cache.
    row: int
    choice: ClosedChoice
    #: Clean tokens [1, T] not in the cache that precede the candidates (T may be 0).
    context: Segment
    #: Position of the candidates' first token.
    start: int
    #: Log-probabilities [V] of the first candidate token, when ``context`` is empty
    #: (the autoregressive decoder has them from its last pass).
    first_logprobs: Tensor | None = None


@dataclass(frozen=True)
class ChoiceResult:
    """The chosen candidate and how sure the model is of it."""

    candidate: Candidate
    #: Its probability among the candidates (softmax of the scores).
    confidence: float
    #: Score of each candidate, in the choice's order (log-probability, minus the
    #: weighted prior's when one applies).
    logprobs: tuple[float, ...]


def supports_choices(model: Transformer) -> bool:
    """True for models whose output at ``i`` predicts token ``i + 1`` (causal, or shifted diffusion)."""
    cfg = model.config
    return cfg.attention == "causal" or cfg.logits_shift == 1


def choice_prior_list(
    model: Transformer,
    prompts: ChoicePriors,
    requests: Sequence[Sequence[int]],
    config: GenerationConfig,
    tokenizer: Tokenizer | None,
) -> list[ChoicePrior | None]:
    """One :class:`ChoicePrior` per request (token ids ``requests``) from ``generate``'s
    ``choice_priors`` (None where unused)."""
    b = len(requests)
    if prompts is None or not config.score_choices or config.temperature > 0:
        return [None] * b
    if len(prompts) != b:
        raise ValueError(f"got {len(prompts)} choice priors for {b} prompts")
    if not supports_choices(model):
        return [None] * b
    out: list[ChoicePrior | None] = []
    for p in prompts:
        if isinstance(p, str):
            if tokenizer is None:
                raise ValueError("text choice priors need a tokenizer; pass token ids")
            p = tokenizer.encode(p)
        out.append(ChoicePrior(model, p, requests[len(out)]) if p else None)
    return out


class ChoicePrior:
    """One request's prior context for its value choices: the conversation without
    the request, read by the decoding model.

    The prior is read at the first choice that needs it. The part it shares with
    the request's own prompt (everything before the request, when the request is
    the last message) is copied from the decoder's cache rather than read again
    (``request``; not for bidirectional models, whose cached prompt saw the
    request); the rest takes one forward pass, counted in ``passes``. The answer
    so far (``extend``) is read with each choice.
    """

    def __init__(
        self, model: Transformer, prompt: Sequence[int], request: Sequence[int] = ()
    ) -> None:
        if len(prompt) < 1:
            raise ValueError("a choice prior needs at least one prompt token")
        self.model = model
        self.prompt = list(prompt)
        self.answer: list[int] = []
        self.passes = 0
        #: Leading prompt tokens equal to the request's (read from its cache).
        self.shared = 0
        if model.config.attention != "bidirectional":
            limit = min(len(self.prompt), len(request)) - 1
            while self.shared < limit and self.prompt[self.shared] == int(request[self.shared]):
                self.shared += 1
        self._cache: KVCache | None = None
        self._position = 0  # position of the prior's last prompt token

    def extend(self, tokens: Sequence[int]) -> None:
        """Append decoded tokens of the answer."""
        self.answer.extend(int(t) for t in tokens)

    def _read_prompt(self, source: tuple[KVCache, int] | None) -> KVCache:
        """The cache of the prior's prompt but its last token (copied in part from ``source``:
        the request's cache and row, whose prompt starts at its first valid entry)."""
        dev = next(self.model.parameters()).device
        dtype = next(self.model.parameters()).dtype
        head = self.prompt[:-1]
        shared = self.shared if source is not None else 0
        if shared:
            cache, row = source  # type: ignore[misc]
            pad = int(cache.valid[row].long().argmax())  # left padding before the prompt
            rows = torch.tensor([row], device=cache.k.device)
            out = cache.copy_rows(rows, len(head) - shared + 1, pad + shared)
        else:
            out = KVCache(self.model.config, 1, max(len(head), 1), device=dev, dtype=dtype)
        rest = head[shared:]
        if rest:
            pos = torch.arange(shared, len(head), device=dev)[None]
            self.model(
                torch.tensor([rest], device=dev),
                positions=pos,
                block_ids=pos,
                cache=out,
                commit_len=len(rest),
                hidden_only=True,
            )
            self.passes += 1
        self._position = len(head)
        return out

    def query(
        self,
        choice: ClosedChoice,
        prefix: Sequence[int] = (),
        source: tuple[KVCache, int] | None = None,
    ) -> tuple[KVCache, ChoiceQuery]:
        """The prior's cache and its query for ``choice`` after the answer so far and
        ``prefix`` (for :func:`score_parts`). ``source`` (the request's cache and
        row) lends the shared part of the prompt the first time."""
        if self._cache is None:
            self._cache = self._read_prompt(source)
        dev = self._cache.k.device
        tail = [self.prompt[-1], *self.answer, *(int(t) for t in prefix)]
        pos = torch.arange(len(tail), device=dev)[None] + self._position
        valid = torch.ones_like(pos, dtype=torch.bool)
        context = Segment(torch.tensor([tail], device=dev), pos, pos.clone(), valid)
        return self._cache, ChoiceQuery(0, choice, context, self._position + len(tail))

    @torch.inference_mode()
    def logprobs(
        self,
        choice: ClosedChoice,
        prefix: Sequence[int] = (),
        source: tuple[KVCache, int] | None = None,
    ) -> list[float]:
        """log p(candidate | prior prompt, answer so far, ``prefix``) for every candidate,
        in a pass of its own."""
        cache, query = self.query(choice, prefix, source)
        self.passes += 1
        return score_parts(self.model, [(cache, query, None)])[0]


def choose(
    model: Transformer,
    cache: KVCache,
    queries: Sequence[ChoiceQuery],
    priors: Sequence[tuple[ChoicePrior, Sequence[int]] | None] | None = None,
    prior_weight: float = 0.0,
    *,
    length: int | None = None,
) -> list[ChoiceResult | None]:
    """The best candidate of each query, scored in one forward pass with the priors'
    candidates (none when every query has a single closed candidate).

    ``priors[i]`` (a prior, the tokens between its answer so far and the choice)
    calibrates a value choice of query ``i`` by ``prior_weight`` (module docstring).
    A key choice (``ConstraintSession.prefer_keys``) is never calibrated; nor is a
    copy choice (:mod:`.constraints.copy_choices`), which is also
    declined (None) when the model does not end the value after its best
    candidate (``COPY_MIN_CLOSE``).
    ``length``: read only the cache's first ``length`` positions (default: all).
    """
    multi = [qi for qi, q in enumerate(queries) if len(q.choice.candidates) > 1 or q.choice.copy]
    items: list[tuple[KVCache, ChoiceQuery, int | None]] = [
        (cache, queries[qi], length) for qi in multi
    ]
    lifted: dict[int, int] = {}  # query -> the item of its prior, scored in the same pass
    for qi in multi:
        given = priors[qi] if priors is not None else None
        choice = queries[qi].choice
        if given is not None and prior_weight > 0 and not (choice.copy or choice.key):
            prior, prefix = given
            lifted[qi] = len(items)
            items.append((*prior.query(queries[qi].choice, prefix, (cache, queries[qi].row)), None))
    raw, _, closings = _score_parts(model, items) if items else ([], [], [])
    own = {qi: k for k, qi in enumerate(multi)}  # query -> its item
    results: list[ChoiceResult | None] = []
    for qi, q in enumerate(queries):
        cands = q.choice.candidates
        if qi not in own:
            results.append(ChoiceResult(cands[0], 1.0, (0.0,)))
            continue
        total = raw[own[qi]]
        if qi in lifted:
            base = raw[lifted[qi]]
            total = [v - prior_weight * p for v, p in zip(total, base, strict=True)]
        if q.choice.bonus and not q.choice.copy:
            total = [v + b for v, b in zip(total, q.choice.bonus, strict=True)]
        scores = torch.tensor(total)
        best = int(scores.argmax())
        chosen = cands[best]
        if q.choice.copy:
            chosen = _closed_copy(chosen, closings[own[qi]][best], _min_close(q.choice))
            if chosen is None:
                results.append(None)
                continue
        results.append(ChoiceResult(chosen, float(scores.softmax(0)[best]), tuple(total)))
    return results


def _min_close(choice: ClosedChoice) -> float:
    """How sure the model must be that the value ends after a copy choice's best candidate:
    ``WORD_MIN_CLOSE`` inside free text, ``NUMBER_MIN_CLOSE`` for a number, else
    ``COPY_MIN_CLOSE``."""
    if choice.within_text:
        return WORD_MIN_CLOSE
    return NUMBER_MIN_CLOSE if choice.number else COPY_MIN_CLOSE


def _closed_copy(
    best: Candidate, closing: tuple[int, float] | None, min_close: float
) -> Candidate | None:
    """A copy choice's ``best`` candidate with its likeliest closing token, or None when
    the value closes after it with less than ``min_close`` probability. A likeliest
    closer that is not among ``best.committed_closers`` (the next word's start, inside
    free text) is left to the decoder: the candidate is committed alone."""
    assert closing is not None
    index, close_logp = closing
    if math.exp(close_logp) < min_close:
        return None
    token, state = best.closers[index]
    if best.committed_closers is not None and token not in best.committed_closers:
        return replace(best, scored=best.tokens, closers=())
    return replace(
        best,
        tokens=(*best.tokens, token),
        scored=(*best.tokens, token),
        states=(*best.states, state),
        closers=(),
    )


def score(
    model: Transformer,
    cache: KVCache,
    queries: Sequence[ChoiceQuery],
    *,
    length: int | None = None,
) -> list[list[float]]:
    """log p(candidate | cache, context) of every candidate of every query, in one pass
    (over the cache's first ``length`` positions when given)."""
    return score_parts(model, [(cache, q, length) for q in queries])


def first_logprobs(
    model: Transformer, cache: KVCache, queries: Sequence[ChoiceQuery]
) -> list[Tensor]:
    """Each query's log-probabilities [V] at its candidates' first token, in one pass
    (none for queries that carry them, ``first_logprobs``)."""
    # One candidate each is enough to read the position before the candidates.
    items = [
        (cache, replace(q, choice=ClosedChoice(q.choice.candidates[:1])), None)
        for q in queries
        if q.first_logprobs is None
    ]
    read = iter(_score_parts(model, items)[1] if items else [])
    return [q.first_logprobs if q.first_logprobs is not None else next(read) for q in queries]


def score_parts(
    model: Transformer, items: Sequence[tuple[KVCache, ChoiceQuery, int | None]]
) -> list[list[float]]:
    """:func:`score` for queries read from different caches (``(cache, query, length)``
    each; ``length`` None reads the whole cache), still in one pass."""
    return _score_parts(model, items)[0]


#: Per query and candidate: (index of the likeliest closer, log-probability that
#: the string closes there), for copy candidates; None for others.
Closings = list[list[tuple[int, float] | None]]


@torch.inference_mode()
def _score_parts(
    model: Transformer, items: Sequence[tuple[KVCache, ChoiceQuery, int | None]]
) -> tuple[list[list[float]], list[Tensor], Closings]:
    """:func:`score_parts`, plus each query's log-probabilities [V] at its candidates'
    first token and its candidates' closings (copy candidates; None for others).

    Each query is one row (tree attention, as in SpecInfer/Medusa verification): its
    context is read once, its request's cache copied once, and the tokens its
    candidates share at their start once, whatever the number of candidates."""
    queries = [q for _, q, _ in items]
    for q in queries:
        if q.context.length == 0 and q.first_logprobs is None:
            raise ValueError("a query without context needs first_logprobs")
    dev = items[0][0].k.device
    rows = [CandidateTrie.of(q) for q in queries]
    # The output before each scored token predicts it: the context's last for a
    # candidate's first token, then the candidate's own tail.
    where: list[tuple[int, int]] = []  # (row, index) per scored token read from this pass
    for i, q in enumerate(queries):
        first = 1 if q.context.length == 0 else 0  # that one comes from first_logprobs
        for c, cand in enumerate(q.choice.candidates):
            for j in range(first, len(cand.scored)):
                where.append((i, q.context.length - 1 if j == 0 else rows[i].paths[c][j - 1]))
    logp = None
    if where:
        parts = [(cache, q.row, cache.length if n is None else n) for cache, q, n in items]
        scratch = KVCache.gather(parts, max(len(r.tokens) for r in rows))
        tokens, positions, block_ids, valid, mask = trie_inputs(rows, scratch, dev)
        hidden = model(
            tokens,
            positions=positions,
            block_ids=block_ids,
            valid=valid,
            cache=scratch,
            commit_len=0,
            attn_mask=mask,
            hidden_only=True,
        )
        at = torch.tensor(where, device=dev)
        logp = model.project(hidden[at[:, 0], at[:, 1]]).float().log_softmax(-1)
    scores: list[list[float]] = [[] for _ in queries]
    firsts: list[Tensor] = [torch.empty(0)] * len(queries)
    closings: list[list[tuple[int, float] | None]] = [[] for _ in queries]
    k = 0
    flat = [(qi, ci) for qi, q in enumerate(queries) for ci in range(len(q.choice.candidates))]
    for qi, ci in flat:
        q = queries[qi]
        scored = q.choice.candidates[ci].scored
        total = 0.0
        first = 0
        if q.context.length == 0:
            assert q.first_logprobs is not None
            total += float(q.first_logprobs[scored[0]])
            first = 1
        if ci == 0:
            firsts[qi] = q.first_logprobs if first else logp[k]  # type: ignore[index]
        cand = q.choice.candidates[ci]
        closing = None
        for j, token in enumerate(scored[first:], start=first):
            assert logp is not None
            if cand.closers and j == len(scored) - 1:  # a copy: any closing token
                row = logp[k, [t for t, _ in cand.closers]]
                closing = (int(row.argmax()), float(row.logsumexp(0)))
                total += closing[1]
            else:
                total += float(logp[k, token])
            k += 1
        scores[qi].append(total)
        closings[qi].append(closing)
    return scores, firsts, closings
