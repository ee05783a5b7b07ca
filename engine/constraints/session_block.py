"""Block diffusion on a :class:`~.enforcement.ConstraintSession`: the in-step protocol.

Inside each denoising step of a block, the sampler asks the session for the best
allowed token per masked position (``propose``), commits positions in confidence
order under the constraint (``commit``), fills the tokens the constraint forces
at the leftmost mask without a forward pass (``jump_forward``, which first pays
what a copy choice left owing) and, once the block is whole, advances the prefix
over it (``finish_block``). The sweeps, the canonical narrowing and the prefix
state live in :mod:`.enforcement` and its other mixins; this module is the step
protocol they serve.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from agentflow.kernels import constrained_select
from agentflow.kernels.automaton_sweep_host import BlockSweep, pack_rows

from ..errors import InfeasibleConstraintError
from .jump_forward import forced_run
from .refused_picks import repick

if TYPE_CHECKING:
    from agentflow.kernels.automaton_sweep_host import HostTables

    from ..canonical_pairs import CanonicalPairs
    from .enforcement import Constraint


class SessionBlock:
    """The block-diffusion methods of a constraint session (a mixin of ``ConstraintSession``)."""

    _c: Constraint
    _t: HostTables
    _state: int
    _pairs: CanonicalPairs | None
    #: (block position, token): the forced text's next token, left to the model by
    #: the last jump-forward (see ``ConstraintSession.__init__``).
    _boundary: tuple[int, int] | None
    _owed: tuple[int, int, tuple[int, ...]] | None

    if TYPE_CHECKING:

        def _block(self, tokens: Tensor, masked: Tensor) -> BlockSweep: ...

        def _check_row(self, tokens: Tensor, masked: Tensor) -> None: ...

        def _feasible(self, row: BlockSweep) -> None: ...

        def _allowed_at(
            self,
            row: BlockSweep,
            tokens: list[int],
            masked: list[bool],
            pos: int,
            refused: int | None = None,
        ) -> np.ndarray: ...

        def _allows(
            self, row: BlockSweep, tokens: list[int], masked: list[bool], pos: int, token: int
        ) -> bool: ...

        def _pay_owed(self, tokens: Tensor, masked: Tensor) -> int: ...

        def advance(self, token_ids: Sequence[int]) -> None: ...

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
                structural = None
                if boundary is not None:
                    states = row.viable(pos)  # unique at a boundary: the prefix is committed
                    state = int(states[0]) if states.size == 1 else -1
                    structural = partial(self._writes_no_text, state)
                choice = repick(
                    self._c.neighbours(),
                    picks[fails[k]],
                    allowed,
                    sub_rows[k],
                    boundary,
                    structural,
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

    def _writes_no_text(self, state: int, token: int) -> bool:
        """True when ``token``, read from ``state``, reads none of its bytes inside free
        text (it may end by opening a string, not go on into its content); False for
        an unknown state (-1)."""
        forced = self._c.forced
        nxt = forced.byte_next
        if nxt is None or not 0 <= token < len(forced.token_bytes):
            return False
        cur = state
        for byte in forced.token_bytes[token]:
            if cur < 0 or self._c.free_text(cur):
                return False
            cur = int(nxt[cur, byte])
        return cur >= 0

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
