"""Decoding knobs, per-call statistics and results, shared by every decoder.

The diffusion sampler, the autoregressive decoder and the hybrid verifier all
take a :class:`GenerationConfig` and return a :class:`GenerationResult`, so a
caller can switch decoding modes without touching anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal

DecodeMode = Literal["diffusion", "hybrid", "ar"]
#: Which masked positions a diffusion step commits (see :mod:`agentflow.engine.sampler`).
CommitOrder = Literal["confidence", "prefix"]
COMMIT_ORDERS: tuple[str, ...] = ("confidence", "prefix")

#: Streaming callback: ``on_block(row, token_ids)`` receives each newly committed
#: piece of row ``row`` of the batch (a block in diffusion mode, a token or a
#: forced run in AR mode), end token excluded.
BlockCallback = Callable[[int, list[int]], None]


@dataclass(frozen=True)
class GenerationConfig:
    """How to decode.

    ``threshold=None`` turns the confidence rule off: each block then takes
    exactly ``steps`` refinement steps (the fixed-step schedule of LLaDA).
    ``temperature=0`` is greedy and deterministic; ``seed`` makes sampling
    reproducible (row ``i`` of a batch samples with ``seed + i``).
    ``top_p`` < 1 keeps only the nucleus of each position's distribution.
    ``order`` is which masked positions a diffusion step commits: ``"confidence"``
    (the most confident anywhere in the block, as LLaDA and Fast-dLLM) or
    ``"prefix"`` (the leftmost masked position and the confident run right after
    it); None uses the model's ``commit_order``.
    ``cache_block_prefix`` keeps a block's clean leading positions in the KV cache
    for the block's later steps, so each pass runs only from the first masked
    position on (fewer positions per pass; approximate: the cached positions do
    not see the block's later commits). The whole block still enters the cache
    exactly once it is done.
    ``score_choices`` (greedy decoding under a constraint): where the constraint
    leaves a choice among a few whole strings (a tool name, an enum value, the
    next key), score each candidate whole with one batched forward pass and take
    the likeliest, instead of deciding on its first token
    (:mod:`agentflow.engine.constraints.closed_choices`). Given a *choice prior*
    (the conversation without its request; ``choice_priors=`` of ``generate``),
    a value choice is scored by how much the request raises each candidate:
    ``log p(c | prompt) - choice_prior_weight * log p(c | prior)``.
    ``text_threshold`` (diffusion, under a constraint): the confidence a position
    needs to join a step's commits, beyond the step's first, when it is inside
    free text (a string value the constraint leaves open, such as an argument
    copied from the request; the token that closes it included); None applies
    ``threshold`` there too. Copied values then grow more nearly one token at a
    time, reading what is already written, while the structure around them still
    commits in parallel. The ``steps`` cap comes first: where it leaves fewer
    steps than masked positions, the step commits what the cap needs.
    ``second_choice`` (greedy diffusion under ``score_choices``): where a row's first
    closed value choice (the first call's tool name) was won by less than this margin
    (log-space, bonuses included), the row is decoded again with the runner-up taken,
    and the decode the model is surer of after the choice is kept; with
    ``min_confidence``, a row that stopped keeps a runner-up decode that finishes
    (:mod:`agentflow.engine.second_choice`). None turns it off.
    """

    max_new_tokens: int = 128
    block_length: int = 32
    steps: int = 32
    threshold: float | None = 0.9
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    order: CommitOrder | None = None
    cache_block_prefix: bool = False
    score_choices: bool = False
    choice_prior_weight: float = 0.75
    text_threshold: float | None = None
    second_choice: float | None = None

    def __post_init__(self) -> None:
        if self.order is not None and self.order not in COMMIT_ORDERS:
            raise ValueError(
                f"order must be one of {', '.join(COMMIT_ORDERS)} or None, got {self.order!r}"
            )
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.block_length < 1:
            raise ValueError(f"block_length must be >= 1, got {self.block_length}")
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1] or None, got {self.threshold}")
        if self.text_threshold is not None and not 0.0 <= self.text_threshold <= 1.0:
            raise ValueError(f"text_threshold must be in [0, 1] or None, got {self.text_threshold}")
        if self.second_choice is not None and not self.second_choice >= 0.0:
            raise ValueError(f"second_choice must be >= 0 or None, got {self.second_choice}")
        if self.temperature < 0.0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.choice_prior_weight < 0.0:
            raise ValueError(f"choice_prior_weight must be >= 0, got {self.choice_prior_weight}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    def row_seed(self, row: int) -> int | None:
        """The sampling seed of batch row ``row`` (None when unseeded)."""
        return None if self.seed is None else self.seed + row


@dataclass
class RowStats:
    """What one request of a batch cost."""

    prompt_tokens: int = 0
    #: Generated tokens, end token excluded (forced ones included).
    tokens: int = 0
    #: Forward passes in which this row still had something to decode.
    nfe: int = 0
    #: Tokens filled by the constraint without a forward pass (jump-forward).
    forced_tokens: int = 0
    #: True when the row stopped at the end token (or its constraint finished).
    finished: bool = False
    #: Prompt tokens copied from the prompt cache instead of read (:mod:`.prefix_store`).
    cached_tokens: int = 0
    #: Diffusion with ``min_confidence``: the lowest confidence of the block that
    #: stopped this row (its earlier blocks are its output); None when none did.
    low_confidence: float | None = None
    #: Diffusion under ``score_choices``: the row's first closed value choice (copies
    #: and key choices aside; None: it made none).
    first_choice: MadeChoice | None = None
    #: Diffusion: the confidence of each output token when the model committed it;
    #: None for a token the constraint forced.
    confidences: list[float | None] = field(default_factory=list)
    #: ``GenerationConfig.second_choice``: the runner-up decoded again, and whether
    #: that decode is the row's output (None: the row was not decoded again).
    second_choice: SecondChoice | None = None


@dataclass(frozen=True)
class MadeChoice:
    """A closed choice a row made: where, among what, and each candidate's score."""

    #: Output position of the chosen candidate's first token.
    offset: int
    #: Tokens the chosen candidate took.
    length: int
    candidates: tuple[str, ...]
    #: Score of each candidate (log-space, priors and bonuses included).
    scores: tuple[float, ...]
    chosen: int

    @property
    def runner_up(self) -> tuple[str, float] | None:
        """The second-best candidate and how far behind the chosen one it scored; None
        when the choice had one candidate."""
        rest = [i for i in range(len(self.candidates)) if i != self.chosen]
        if not rest:
            return None
        best = max(rest, key=lambda i: self.scores[i])
        return self.candidates[best], self.scores[self.chosen] - self.scores[best]


@dataclass(frozen=True)
class SecondChoice:
    """A row decoded again with the runner-up of its first choice
    (``GenerationConfig.second_choice``)."""

    first: str
    runner_up: str
    #: How far behind the first the runner-up scored.
    margin: float
    #: Mean log-confidence of the model's tokens after the choice, in each decode
    #: (NaN where the decode committed none there).
    first_sureness: float
    second_sureness: float
    #: True when the runner-up's decode is the row's output.
    kept: bool


@dataclass
class GenerationStats:
    """Cost of one ``generate`` call over the whole batch."""

    mode: str
    tokens: int = 0
    #: Model forward passes (one pass serves every row of the batch).
    nfe: int = 0
    forced_tokens: int = 0
    seconds: float = 0.0
    rows: list[RowStats] = field(default_factory=list)

    @property
    def tokens_per_forward(self) -> float:
        """Generated tokens per forward pass, summed over the batch."""
        return self.tokens / self.nfe if self.nfe else float(self.tokens)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        """The JSON form used by the CLI and the benchmarks."""
        return {
            "tokens": self.tokens,
            "nfe": self.nfe,
            "forced_tokens": self.forced_tokens,
            "seconds": self.seconds,
            "mode": self.mode,
            "tokens_per_forward": self.tokens_per_forward,
        }


@dataclass
class GenerationResult:
    """Generated token ids (and text when a tokenizer is known) per row, plus stats."""

    sequences: list[list[int]]
    stats: GenerationStats
    texts: list[str] | None = None

    @property
    def text(self) -> str:
        """The text of a single-prompt call."""
        if self.texts is None:
            raise ValueError("no tokenizer was given, so there is no text; use .sequences")
        if len(self.texts) != 1:
            raise ValueError(f"the batch has {len(self.texts)} rows; use .texts")
        return self.texts[0]


def end_index(tokens: Sequence[int], ends: Collection[int]) -> int | None:
    """Index of the first token of ``tokens`` in ``ends``, or None."""
    for i, t in enumerate(tokens):
        if t in ends:
            return i
    return None
