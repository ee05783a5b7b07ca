"""Statistics of hybrid and ``auto`` decoding: both models' forward passes, acceptance, modes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .generation import GenerationStats


@dataclass(frozen=True)
class ServedMode:
    """Which mode produced a request's output, and why."""

    #: ``"diffusion"`` or ``"hybrid"``.
    mode: str
    #: ``"requested"``, ``"confident"`` (auto kept the diffusion draft), or what made
    #: ``auto`` fall back: ``"low_confidence: ..."``, ``"infeasible: ..."``, or a
    #: caller's reason such as ``"validation: ..."``.
    reason: str
    #: Leading tokens of a hybrid-served ``auto`` output that the diffusion draft wrote
    #: (its confident blocks, :attr:`.HybridOptions.keep_confident`).
    diffusion_tokens: int = 0

    def to_dict(self) -> dict[str, str | int]:
        return {"mode": self.mode, "reason": self.reason, "diffusion_tokens": self.diffusion_tokens}


@dataclass
class HybridStats(GenerationStats):
    """:class:`GenerationStats` plus each model's share of the work.

    ``nfe`` is the sum of both models' forward passes.
    """

    #: Drafter (diffusion model) forward passes, the diffusion pass of ``auto`` included.
    draft_nfe: int = 0
    #: Verifier (autoregressive model) forward passes: one per draft round or verifier-only step.
    verify_nfe: int = 0
    #: Rounds that drafted (one draft, one verify).
    draft_rounds: int = 0
    #: Verifier-only steps (plain autoregressive decoding while drafting does not pay).
    ar_steps: int = 0
    #: Tokens proposed by the drafter to the verifier.
    drafted_tokens: int = 0
    #: Proposed tokens the verifier kept.
    accepted_tokens: int = 0
    #: Per request, the mode that served it and why.
    served: list[ServedMode] = field(default_factory=list)
    #: Output tokens by the path that produced them: ``draft`` (draft rounds: kept draft
    #: tokens, the verifier's own token and the forced tokens after it), ``ar``
    #: (verifier-only steps, forced tokens after them included), ``constraint`` (forced
    #: before the first model token), ``diffusion`` (``auto`` requests served by diffusion).
    path_tokens: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("draft", "ar", "constraint", "diffusion"), 0)
    )

    @property
    def mean_accepted(self) -> float:
        """Draft tokens kept per draft round (the verifier's own token not counted)."""
        return self.accepted_tokens / self.draft_rounds if self.draft_rounds else math.nan

    @property
    def acceptance_rate(self) -> float:
        """Fraction of proposed draft tokens the verifier kept."""
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else math.nan

    def to_dict(self) -> dict[str, object]:
        out = super().to_dict()
        out.update(
            draft_nfe=self.draft_nfe,
            verify_nfe=self.verify_nfe,
            draft_rounds=self.draft_rounds,
            ar_steps=self.ar_steps,
            path_tokens=dict(self.path_tokens),
            drafted_tokens=self.drafted_tokens,
            accepted_tokens=self.accepted_tokens,
            mean_accepted=None if math.isnan(self.mean_accepted) else self.mean_accepted,
            served=[s.to_dict() for s in self.served],
        )
        return out
