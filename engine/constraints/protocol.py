"""The interface between the samplers and a constraint.

A :class:`DecodeConstraint` is the per-request state of a compiled constraint as
decoding advances. The block-diffusion sampler, the autoregressive decoder and
the hybrid verifier all drive it through these methods; the unconstrained path
simply passes ``None``.

Division of labour in one denoising step of a block (``tokens``/``masked`` are
the block's current row, ``logits`` the forward pass's logits for the block):

1. ``jump_forward`` — before the forward pass: fill the tokens the constraint
   forces at the leftmost mask (no forward pass needed for them).
2. ``propose`` — after the forward pass: the best *allowed* token and its
   confidence for every masked position (fast path: the model's own argmax when
   it is allowed; the full allowed mask only where it is not).
3. The sampler picks the positions to commit (confidence ≥ threshold, at least
   the most confident one) and passes them in confidence order to
4. ``commit`` — commits them one by one, re-sweeping after each, so tokens chosen
   together never contradict each other; a proposal made invalid by an earlier
   commit is skipped this step (re-proposed if it was the only one).
5. ``finish_block`` — once the block has no masks left: advance past it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from torch import Tensor


@runtime_checkable
class DecodeConstraint(Protocol):
    """Per-request constraint state; see the module docstring for the step protocol."""

    @property
    def done(self) -> bool:
        """True once the end token has been committed from a final state."""
        ...

    def jump_forward(self, tokens: Tensor, masked: Tensor) -> int:
        """Fill forced tokens at the leftmost mask in place; return how many were filled."""
        ...

    def propose(
        self,
        tokens: Tensor,
        masked: Tensor,
        logits: Tensor,
        *,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> tuple[Tensor, Tensor]:
        """(token [L] int64, confidence [L] fp32) for masked positions; other entries are unspecified."""
        ...

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
    ) -> list[int]:
        """Commit proposals at ``order`` positions one by one (in place); return the committed positions.

        Raises :class:`~agentflow.engine.errors.InfeasibleConstraintError` when no
        position can be committed.
        """
        ...

    def finish_block(self, tokens: Tensor) -> None:
        """Advance the prefix state over a fully committed block."""
        ...

    # -- autoregressive use (AR decoding and the hybrid verifier) --

    def next_token_mask(self) -> Tensor:
        """Allowed-token bitmask int32 [ceil(V/32)] for the next token after the prefix."""
        ...

    def forced_tokens(self) -> list[int]:
        """Tokens forced right after the prefix (jump-forward for AR decoding)."""
        ...

    def refused_pick(self, token: int, logits: Tensor) -> int | None:
        """The token to take after the prefix when the greedy ``token`` is refused.

        The allowed token sharing the longest byte prefix with it, the likeliest by
        ``logits`` among those; None sends the caller to the plain masked argmax.
        """
        ...

    def advance(self, token_ids: Sequence[int]) -> None:
        """Append tokens to the prefix (they must be allowed)."""
        ...

    def checkpoint(self) -> Any:
        """An opaque snapshot of the prefix state (the hybrid verifier rolls back to it)."""
        ...

    def rollback(self, snapshot: Any) -> None:
        """Restore a snapshot taken by :meth:`checkpoint`."""
        ...


@runtime_checkable
class ChoiceConstraint(Protocol):
    """A constraint that reports closed choices (``GenerationConfig.score_choices``).

    Its ``commit`` also takes ``until_choice=True``: stop committing once the
    leftmost masked position opens a closed choice.
    """

    def block_choice(self, tokens: Tensor, masked: Tensor) -> tuple[int, Any] | None:
        """(leftmost masked position, its :class:`~.closed_choices.ClosedChoice`) or None."""
        ...

    def fill_choice(self, tokens: Tensor, masked: Tensor, start: int, candidate: Any) -> None:
        """Commit a candidate of :meth:`block_choice` at ``start``, in place."""
        ...

    def next_choice(self, room: int) -> Any:
        """The closed choice right after the prefix (within ``room`` tokens), or None."""
        ...

    def decline_choice(self, tokens: Tensor, masked: Tensor, start: int) -> None:
        """The decoder passed on the copy choice at ``start``: stop offering it."""
        ...


@runtime_checkable
class FreeTextConstraint(Protocol):
    """A constraint that tells free text from structure (``GenerationConfig.text_threshold``).

    Its ``commit`` also takes ``confidence=`` (the proposals' [L]) and
    ``text_threshold=``: it stops at a position, after the first commit, that is
    inside free text and whose proposal's confidence is under the threshold.
    """

    def in_text(self, tokens: Tensor, masked: Tensor, pos: int) -> bool:
        """True when block position ``pos`` is inside free text (its state fixed by the left)."""
        ...
