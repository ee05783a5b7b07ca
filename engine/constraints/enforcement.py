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

The same session masks autoregressive decoding (``next_token_mask``,
``forced_tokens``: :mod:`.session_autoregressive`; ``advance``,
``checkpoint``/``rollback``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from agentflow.kernels import Backend, SweepTables, constrained_select
from agentflow.kernels.automaton_sweep_host import BlockSweep, HostTables, pack_rows

from ..errors import InfeasibleConstraintError
from ..tokenizer import Tokenizer
from .automaton import TokenAutomaton
from .closed_choices import Candidate, candidates_at
from .free_text import free_text_states
from .jump_forward import ForcedText, forced_run
from .refused_picks import ByteNeighbours, repick
from .session_autoregressive import SessionAutoregressive
from .session_canonical import SessionCanonical
from .session_choices import SessionChoices

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
        self._free_text: np.ndarray | None = None  # built on first use (:mod:`.free_text`)

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

    def free_text(self, state: int) -> bool:
        """True when ``state`` is inside free text (:mod:`.free_text`)."""
        if self._free_text is None:
            found = free_text_states(self.forced, self.host.live)
            self._free_text = (
                found if found is not None else np.zeros(self.host.num_states, dtype=bool)
            )
        return bool(self._free_text[state])

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


class ConstraintSession(SessionAutoregressive, SessionChoices, SessionCanonical):
    """Per-request constraint state implementing :class:`~.protocol.DecodeConstraint`."""

    def __init__(
        self, constraint: Constraint, max_tokens: int | None = None, *, canonical: bool = False
    ) -> None:
        self._c = constraint
        self._t = constraint.host
        self._state = constraint.automaton.initial_state
        self._max_tokens = max_tokens
        self._used = 0  # tokens of the committed prefix
        self._last: int | None = None  # the prefix's last token (None: none yet)
        self._before_last: int | None = None  # the state before it (None: unknown)
        self._pairs = constraint.tokenizer.canonical_pairs if canonical else None
        self._row: BlockSweep | None = None  # the sweeps of the block being denoised
        # (block position, token): the forced text's next token, left to the model by
        # the last jump-forward; a greedy pick there that the constraint refuses takes it.
        self._boundary: tuple[int, int] | None = None

    # -- state --

    @property
    def state(self) -> int:
        """The automaton state after the committed prefix."""
        return self._state

    @property
    def canonical(self) -> bool:
        """True when the session keeps output on the tokenizer's own segmentation."""
        return self._pairs is not None

    @property
    def done(self) -> bool:
        """True once the end token has been committed from a final state."""
        return self._state == self._c.automaton.done_state

    def checkpoint(self) -> tuple[int, int, int | None]:
        """The prefix state (automaton state, tokens used, last token); pass it to :meth:`rollback`."""
        return (self._state, self._used, self._last)

    def rollback(self, snapshot: tuple[int, int, int | None]) -> None:
        """Restore the prefix state saved by :meth:`checkpoint`."""
        try:
            state, used, last = snapshot
        except (TypeError, ValueError):
            raise ValueError(f"snapshot {snapshot!r} is not a checkpoint of this session") from None
        if not 0 <= state < self._t.num_states or used < 0:
            raise ValueError(f"snapshot {snapshot!r} is not a state of this constraint")
        self._state, self._used, self._last = state, used, last
        self._before_last = None  # not in the snapshot: a copy choice waits for the next block
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

    def _masks(
        self,
        row: BlockSweep,
        tokens: list[int],
        masked: list[bool],
        positions: Sequence[int],
        device: torch.device,
    ) -> Tensor:
        """Packed allowed masks int32 [len(positions), ceil(V/32)] on ``device``."""
        rows = [self._allowed_at(row, tokens, masked, p) for p in positions]
        return pack_rows(np.stack(rows)).to(device)

    def _select_allowed(
        self, rows: Tensor, allowed: Tensor, temperature: float, seed: int | None
    ) -> tuple[Tensor, Tensor]:
        """``constrained_select`` under masks; rows whose allowed tokens all have ``-inf``
        logits (e.g. cut by top-p) pick uniformly among the allowed tokens instead."""
        tok, conf = constrained_select(rows, allowed, temperature, seed, backend=self._c.backend)
        lost = torch.nonzero(tok < 0).flatten()
        if lost.numel():
            flat = torch.zeros(lost.numel(), rows.shape[1], device=rows.device)
            retry_tok, retry_conf = constrained_select(
                flat, allowed[lost], max(temperature, 1.0), seed, backend=self._c.backend
            )
            if bool((retry_tok < 0).any()):
                raise InfeasibleConstraintError("a masked position has no allowed token")
            tok[lost], conf[lost] = retry_tok, retry_conf
        return tok, conf

    def _logits(self, logits: Tensor, length: int) -> Tensor:
        v = self._c.vocab_size
        if logits.dim() != 2 or logits.shape[0] != length or logits.shape[1] < v:
            raise ValueError(f"logits must be [L={length}, >= {v}], got {tuple(logits.shape)}")
        return logits[:, :v]

    # -- block diffusion --

    def propose(
        self,
        tokens: Tensor,
        masked: Tensor,
        logits: Tensor,
        *,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Best allowed token and confidence per masked position (other entries: token as is, 0)."""
        self._check_row(tokens, masked)
        logits = self._logits(logits, tokens.shape[0])
        out_tok = tokens.clone().to(torch.int64)
        out_conf = torch.zeros(tokens.shape[0], dtype=torch.float32, device=logits.device)
        row = self._block(tokens, masked)
        positions = [i for i, m in enumerate(row.masked) if m]
        if not positions:
            return out_tok, out_conf
        self._feasible(row)
        if seed is None and temperature > 0:
            seed = int(torch.randint(0, 2**62, (1,)).item())
        rows = logits[positions]
        tok, conf = constrained_select(rows, None, temperature, seed, backend=self._c.backend)
        picks = tok.tolist()
        tl, ml = tokens.tolist(), masked.tolist()
        fails = [
            k for k, pos in enumerate(positions) if not self._allows(row, tl, ml, pos, picks[k])
        ]
        if fails and temperature == 0:  # greedy: no row-keyed noise, re-pick the failed rows only
            failed = [positions[k] for k in fails]
            allowed_at = np.stack(
                [
                    self._allowed_at(row, tl, ml, p, refused=picks[k])
                    for p, k in zip(failed, fails, strict=True)
                ]
            )
            sub = torch.tensor(fails, dtype=torch.int64, device=rows.device)
            masks = pack_rows(allowed_at).to(rows.device)
            sub_rows = rows[sub]
            sub_tok, sub_conf = self._select_allowed(sub_rows, masks, temperature, seed)
            held_pos, held = self._boundary or (-1, None)
            for k, (pos, allowed) in enumerate(zip(failed, allowed_at, strict=True)):
                boundary = held if pos == held_pos else None
                choice = repick(
                    self._c.neighbours(), picks[fails[k]], allowed, sub_rows[k], boundary
                )
                if choice is not None:
                    sub_tok[k], sub_conf[k] = choice
            tok[sub.to(tok.device)], conf[sub.to(conf.device)] = sub_tok, sub_conf
        elif fails:
            words = (self._c.vocab_size + 31) // 32
            allowed = torch.full((len(positions), words), -1, dtype=torch.int32)
            allowed[fails] = self._masks(row, tl, ml, [positions[k] for k in fails], allowed.device)
            tok, conf = self._select_allowed(rows, allowed.to(rows.device), temperature, seed)
        idx = torch.tensor(positions, dtype=torch.int64, device=out_tok.device)
        out_tok[idx] = tok.to(out_tok.device)
        out_conf[idx.to(out_conf.device)] = conf
        return out_tok, out_conf

    def commit(
        self,
        tokens: Tensor,
        masked: Tensor,
        order: Sequence[int],
        proposal: Tensor,
        logits: Tensor,
        *,
        temperature: float = 0.0,
        seed: int | None = None,
        until_choice: bool = False,
        confidence: Tensor | None = None,
        text_threshold: float | None = None,
    ) -> list[int]:
        """Commit proposals at ``order`` one by one, re-sweeping after each; return committed positions.

        The re-sweep after a commit is incremental (:meth:`BlockSweep.sync`).
        ``until_choice`` stops once the leftmost masked position opens a closed
        choice (:meth:`block_choice`), which the decoder then makes whole.
        ``text_threshold`` (with the proposals' ``confidence`` [L]) stops at a
        position, after the first commit, that is inside free text
        (:meth:`in_text`) and whose proposal's confidence is under it.
        """
        self._check_row(tokens, masked)
        length = tokens.shape[0]
        for pos in order:
            if not 0 <= pos < length or not bool(masked[pos]):
                raise ValueError(f"position {pos} is not a masked position of this block")
        committed: list[int] = []
        row = self._block(tokens, masked)
        self._feasible(row)
        picks = proposal.tolist()
        for pos in order:
            if committed:
                if until_choice and self.block_choice(tokens, masked) is not None:
                    break
                row = self._block(tokens, masked)
                if (
                    text_threshold is not None
                    and confidence is not None
                    and float(confidence[pos]) < text_threshold
                    and self._in_text(row, pos)
                ):
                    break
            token = int(picks[pos])
            allowed = (
                row.allows(pos, token)
                if self._pairs is None
                else self._allows(row, tokens.tolist(), masked.tolist(), pos, token)
            )
            if not allowed:
                continue
            tokens[pos] = token
            masked[pos] = False
            committed.append(pos)
        if committed or not order:
            return committed
        # Every proposal was invalidated: pick again at the most confident position.
        pos = order[0]
        rows = self._logits(logits, length)[pos : pos + 1]
        mask = self._masks(row, tokens.tolist(), masked.tolist(), [pos], rows.device)
        tok, _ = self._select_allowed(rows, mask, temperature, seed)
        token = int(tok[0])
        if token < 0:
            raise InfeasibleConstraintError(f"no allowed token at block position {pos}")
        tokens[pos] = token
        masked[pos] = False
        return [pos]

    def in_text(self, tokens: Tensor, masked: Tensor, pos: int) -> bool:
        """True when block position ``pos`` is inside free text (:mod:`.free_text`): the
        positions left of it fix a single state before it, and that state is free text.
        A token there continues the text or ends it (a closing quote): both are copying."""
        self._check_row(tokens, masked)
        return self._in_text(self._block(tokens, masked), pos)

    def _in_text(self, row: BlockSweep, pos: int) -> bool:
        states = row.viable(pos)
        return states.size == 1 and self._c.free_text(int(states[0]))

    def jump_forward(self, tokens: Tensor, masked: Tensor) -> int:
        """Fill the tokens forced at the leftmost mask, in place; return how many were filled."""
        self._check_row(tokens, masked)
        filled = self._pay_owed(tokens, masked) if self._owed is not None else 0
        self._boundary = None
        while True:
            row = self._block(tokens, masked)
            if True not in row.masked:
                break
            self._feasible(row)
            start = row.masked.index(True)
            # The prefix is deterministic: at most one state reaches the leftmost mask.
            states = row.viable(start)
            if states.size != 1:
                break
            room = 0
            while start + room < row.length and row.masked[start + room]:
                room += 1
            after = row.backward[start + 1 : start + room + 1]
            forced = forced_run(self._t, self._c.forced, int(states[0]), room, after.__getitem__)
            run = forced.tokens
            if forced.boundary is not None and len(run) < room:
                self._boundary = (start + len(run), forced.boundary)
            if not run:
                break
            tokens[start : start + len(run)] = torch.tensor(run, dtype=tokens.dtype)
            masked[start : start + len(run)] = False
            filled += len(run)
        return filled

    def finish_block(self, tokens: Tensor) -> None:
        """Advance the prefix state over a fully committed block."""
        self.advance(tokens.tolist())

    # -- the prefix (autoregressive methods: :mod:`.session_autoregressive`) --

    def advance(self, token_ids: Sequence[int]) -> None:
        """Append tokens to the prefix; raise :class:`InfeasibleConstraintError` on a forbidden one."""
        t = self._t
        state = before = self._state
        for pos, token in enumerate(token_ids):
            before = state
            nxt = t.step(state, int(token)) if 0 <= int(token) < t.vocab_size else -1
            if nxt < 0 or not t.live[nxt]:
                raise InfeasibleConstraintError(
                    f"token {int(token)} at offset {pos} is not allowed in automaton state {state}"
                )
            state = nxt
        self._state = state
        self._used += len(token_ids)
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
