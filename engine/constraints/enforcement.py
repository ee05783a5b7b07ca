"""In-step constraint enforcement: the :class:`DecodeConstraint` the samplers drive.

:class:`Constraint` holds what is compiled once per (constraint, tokenizer): the
token automaton, its sweep tables and the forced-text index. Each request gets
a :class:`ConstraintSession` (``constraint.session()``), which tracks the
automaton state after the committed prefix and enforces the constraint inside
each denoising step of a block:

- sweeps: forward and backward state sets over the block row (fixed tokens and
  masks, entry state from the prefix, an unbounded future or the token budget
  after it), kept by a :class:`~agentflow.kernels.automaton_sweep_host.BlockSweep`
  that is updated incrementally as positions are committed, on host arrays (one
  row is too little work for a kernel launch);
- ``propose``: the model's own pick per masked position is checked first (fast
  path, one lookup); the allowed mask is built only for positions where it
  fails, and :func:`agentflow.kernels.constrained_select`
  picks again there. The Gumbel noise is keyed by row, so a sampled token that
  passes the fast path is exactly the token the masked pick would return; its
  confidence is then the unmasked probability (a lower bound of the masked one).
  A greedy pick that fails is replaced by what keeps the model's intent
  (:mod:`.refused_picks`) before the masked argmax;
- ``commit``: positions in confidence order, one by one, re-sweeping (incrementally) after each;
- ``jump_forward``: forced tokens at the leftmost mask, without a forward pass;
- with ``canonical=True``, tokens must also pair canonically with their clean
  neighbours (:mod:`agentflow.engine.canonical_pairs`): a token the tokenizer
  would have merged with its neighbour is refused while a canonical one is allowed.

The step methods live in :mod:`.session_block`. The same session masks
autoregressive decoding (``next_token_mask``, ``forced_tokens``:
:mod:`.session_autoregressive`; ``advance``, ``checkpoint``/``rollback``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from agentflow.kernels import Backend, SweepTables
from agentflow.kernels.automaton_sweep_host import BlockSweep, HostTables

from ..errors import InfeasibleConstraintError
from ..tokenizer import Tokenizer
from .automaton import TokenAutomaton
from .closed_choices import Candidate, candidates_at
from .free_text import free_text_states
from .jump_forward import ForcedText
from .refused_picks import ByteNeighbours
from .session_autoregressive import SessionAutoregressive
from .session_block import SessionBlock
from .session_canonical import SessionCanonical
from .session_choices import SessionChoices
from .word_copies import next_word, word_enders

if TYPE_CHECKING:
    from .index import ConstraintCompiler


class Constraint:
    """A compiled constraint over one tokenizer; cheap to share, one :meth:`session` per request."""

    def __init__(
        self, automaton: TokenAutomaton, tokenizer: Tokenizer, *, backend: Backend = "auto"
    ) -> None:
        if automaton.vocab_size > tokenizer.vocab_size:
            raise ValueError(
                f"automaton vocabulary ({automaton.vocab_size}) exceeds the tokenizer's "
                f"({tokenizer.vocab_size})"
            )
        if tokenizer.end_id is not None and tokenizer.end_id != automaton.end_token_id:
            raise ValueError(
                f"automaton end token {automaton.end_token_id} differs from the tokenizer's "
                f"{tokenizer.end_id}"
            )
        self.automaton = automaton
        self.tokenizer = tokenizer
        self.backend: Backend = backend
        #: Kernel inputs, on the automaton's device.
        self.tables = SweepTables.from_transitions(
            automaton.num_states,
            automaton.vocab_size,
            automaton.offsets,
            automaton.tokens,
            automaton.next_states,
            automaton.live,
        )
        # The in-step work on one block row is a few set operations per position:
        # latency-bound, so it runs on host (NumPy) copies, never through a kernel launch.
        on_cpu = automaton.offsets.device.type == "cpu"
        self.host = HostTables.from_sweep_tables(
            self.tables if on_cpu else _to_cpu(self.tables), automaton.done_state
        )
        self.forced = ForcedText.build(automaton, tokenizer)
        #: int64 [S]: fewest tokens from each state to acceptance (``S + 1`` when unreachable).
        self.distance = torch.from_numpy(self.host.dist)
        self._neighbours: ByteNeighbours | None = None  # built on the first refused pick
        # Closed choices by automaton state, found on first use (:mod:`.closed_choices`).
        self._choices: dict[int, tuple[Candidate, ...] | None] = {}
        self._key_choices: dict[int, tuple[Candidate, ...] | None] = {}
        self._free_text: np.ndarray | None = None  # built on first use (:mod:`.free_text`)
        self._word_enders: tuple[int, ...] | None = None  # built on first use (word_copies)

    @classmethod
    def from_schema(
        cls,
        schema: Any,
        tokenizer: Tokenizer,
        *,
        compiler: ConstraintCompiler | None = None,
        backend: Backend = "auto",
        **options: Any,
    ) -> Constraint:
        """Compile a JSON Schema for ``tokenizer`` (through ``compiler``'s cache when given).

        ``options`` go to :func:`~.schema.compile_json_schema` (``strict``, ``pretty``, ...).
        """
        from .index import ConstraintCompiler

        compiler = compiler if compiler is not None else ConstraintCompiler(max_entries=1)
        compiled = compiler.compile_schema(schema, tokenizer, **options)
        return cls(compiled.automaton, tokenizer, backend=backend)

    @property
    def vocab_size(self) -> int:
        """Tokens the constraint knows; logits may have more columns (never allowed)."""
        return self.automaton.vocab_size

    def neighbours(self) -> ByteNeighbours:
        """The vocabulary's byte-prefix index for refused greedy picks (:mod:`.refused_picks`)."""
        if self._neighbours is None:
            self._neighbours = ByteNeighbours(self.forced.token_bytes)
        return self._neighbours

    def candidates(self, state: int) -> tuple[Candidate, ...] | None:
        """The closed choice open at ``state`` (every candidate, before room and budget), or None."""
        if state not in self._choices:
            self._choices[state] = candidates_at(self.forced, self.host.step, state, self.host.live)
        return self._choices[state]

    def key_candidates(self, state: int) -> tuple[Candidate, ...] | None:
        """The object keys open at ``state`` as a closed choice (every candidate), or None."""
        if state not in self._key_choices:
            self._key_choices[state] = candidates_at(
                self.forced, self.host.step, state, self.host.live, keys=True
            )
        return self._key_choices[state]

    def free_text(self, state: int) -> bool:
        """True when ``state`` is inside free text (:mod:`.free_text`)."""
        if self._free_text is None:
            found = free_text_states(self.forced, self.host.live)
            self._free_text = (
                found if found is not None else np.zeros(self.host.num_states, dtype=bool)
            )
        return bool(self._free_text[state])

    def word_enders(self) -> tuple[int, ...]:
        """The tokens that end a word inside free text (:func:`.word_copies.ends_word`)."""
        if self._word_enders is None:
            self._word_enders = word_enders(self.forced)
        return self._word_enders

    def session(
        self, max_tokens: int | None = None, *, canonical: bool = False
    ) -> ConstraintSession:
        """A fresh per-request state at the automaton's initial state.

        With ``max_tokens`` (the request's ``max_new_tokens``) the session only
        allows tokens after which the end can still be reached within the
        budget, so the answer is complete when the budget runs out. With
        ``canonical`` it also keeps the output on the tokenizer's own
        segmentation (docs/constraints.md, "Canonical pairs").
        """
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1 or None, got {max_tokens}")
        return ConstraintSession(self, max_tokens, canonical=canonical)


class ConstraintSession(SessionBlock, SessionAutoregressive, SessionChoices, SessionCanonical):
    """Per-request constraint state implementing :class:`~.protocol.DecodeConstraint`."""

    def __init__(
        self, constraint: Constraint, max_tokens: int | None = None, *, canonical: bool = False
    ) -> None:
        self._c = constraint
        self._t = constraint.host
        self._state = constraint.automaton.initial_state
        self._max_tokens = max_tokens
        self._tokens: list[int] = []  # the committed prefix
        self._last: int | None = None  # the prefix's last token (None: none yet)
        self._before_last: int | None = None  # the state before it (None: unknown)
        self._word: bytes | None = None  # the word in progress in free text (:mod:`.word_copies`)
        self._pairs = constraint.tokenizer.canonical_pairs if canonical else None
        self._row: BlockSweep | None = None  # the sweeps of the block being denoised
        # (block position, token): the forced text's next token, left to the model by
        # the last jump-forward; a greedy pick there that the constraint refuses takes it.
        self._boundary: tuple[int, int] | None = None

    def restarted(self) -> ConstraintSession:
        """A fresh session of the same constraint at its initial state, with this one's
        budget, segmentation, preferences and copy spans (not its :meth:`pick_first`)."""
        fresh = ConstraintSession(self._c, self._max_tokens, canonical=self.canonical)
        fresh._preferred, fresh._prefer_once = self._preferred, self._prefer_once
        fresh._lasting, fresh._key_bonuses = self._lasting, self._key_bonuses
        fresh._offer_as(self)
        return fresh

    # -- state --

    @property
    def state(self) -> int:
        """The automaton state after the committed prefix."""
        return self._state

    @property
    def _used(self) -> int:
        """Tokens of the committed prefix."""
        return len(self._tokens)

    @property
    def canonical(self) -> bool:
        """True when the session keeps output on the tokenizer's own segmentation."""
        return self._pairs is not None

    @property
    def done(self) -> bool:
        """True once the end token has been committed from a final state."""
        return self._state == self._c.automaton.done_state

    def checkpoint(self) -> tuple[int, int, int | None, int | None, bytes | None]:
        """The prefix state (automaton state, tokens used, last token, the state before
        it, the word in progress); pass it to :meth:`rollback`."""
        return (self._state, self._used, self._last, self._before_last, self._word)

    def rollback(self, snapshot: tuple[int, int, int | None, int | None, bytes | None]) -> None:
        """Restore the prefix state saved by :meth:`checkpoint`."""
        try:
            state, used, last, before_last, word = snapshot
        except (TypeError, ValueError):
            raise ValueError(f"snapshot {snapshot!r} is not a checkpoint of this session") from None
        if not 0 <= state < self._t.num_states or used < 0:
            raise ValueError(f"snapshot {snapshot!r} is not a state of this constraint")
        if used > len(self._tokens):
            raise ValueError(f"snapshot {snapshot!r} is past this session's prefix")
        self._state, self._last = state, last
        del self._tokens[used:]
        self._before_last = before_last
        self._word = word
        self._owed = None  # a copy's tokens owed by a block that was rolled back

    def _exit_level(self, after: int) -> int:
        """States allowed once ``after`` more tokens follow the prefix, as a level of ``dist``."""
        if self._max_tokens is None:
            return self._t.num_states  # every live state: an unbounded future
        # A block running past the budget must have ended (be in DONE) by its last position.
        return max(self._max_tokens - self._used - after, 0)

    # -- sweeps --

    def _block(self, tokens: Tensor, masked: Tensor) -> BlockSweep:
        """The sweeps of the block row, brought up to date (incrementally when possible)."""
        length = tokens.shape[0]
        level = min(self._exit_level(length), self._t.num_states)
        row = self._row
        if row is None or (row.entry, row.exit_level, row.length) != (self._state, level, length):
            row = self._row = BlockSweep(self._t, self._state, level)
        row.sync(tokens.tolist(), masked.tolist())
        return row

    def _check_row(self, tokens: Tensor, masked: Tensor) -> None:
        if tokens.dim() != 1 or masked.shape != tokens.shape or masked.dtype != torch.bool:
            raise ValueError(
                f"tokens must be [L] and masked bool [L]; got {tuple(tokens.shape)} and "
                f"{masked.dtype} {tuple(masked.shape)}"
            )

    def _feasible(self, row: BlockSweep) -> None:
        if not row.feasible():
            raise InfeasibleConstraintError(
                f"no completion of this block satisfies the constraint (prefix state {self._state})"
            )

    # -- the prefix (autoregressive methods: :mod:`.session_autoregressive`) --

    def advance(self, token_ids: Sequence[int]) -> None:
        """Append tokens to the prefix; raise :class:`InfeasibleConstraintError` on a forbidden one."""
        t = self._t
        state = before = self._state
        word = self._word
        words = bool(self._word_spans)  # the word in progress matters to within-text copies
        for pos, token in enumerate(token_ids):
            before = state
            nxt = t.step(state, int(token)) if 0 <= int(token) < t.vocab_size else -1
            if nxt < 0 or not t.live[nxt]:
                raise InfeasibleConstraintError(
                    f"token {int(token)} at offset {pos} is not allowed in automaton state {state}"
                )
            state = nxt
            if words:
                word = next_word(
                    word, self._c.forced.token_bytes[int(token)], self._c.free_text(nxt)
                )
        self._state = state
        self._word = word
        self._tokens.extend(int(t) for t in token_ids)
        if len(token_ids):
            self._last = int(token_ids[-1])
            self._before_last = before


def _to_cpu(tables: SweepTables) -> SweepTables:
    moved = {k: (v.cpu() if isinstance(v, Tensor) else v) for k, v in tables.__dict__.items()}
    return SweepTables(**moved)


def compile_constraint(
    schema: Any,
    tokenizer: Tokenizer,
    *,
    compiler: ConstraintCompiler | None = None,
    **options: Any,
) -> Constraint:
    """A JSON Schema as a ready :class:`Constraint` (see :meth:`Constraint.from_schema`)."""
    return Constraint.from_schema(schema, tokenizer, compiler=compiler, **options)
