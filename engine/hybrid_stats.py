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

    def to_dict(self) -> dict[str, str]:
        return {"mode": self.mode, "reason": self.reason}


@dataclass
class HybridStats(GenerationStats):
    """:class:`GenerationStats` plus each model's share of the work.

    ``nfe`` is the sum of both models' forward passes.
    """

    #: Drafter (diffusion model) forward passes, the diffusion pass of ``auto`` included.
    draft_nfe: int = 0
    #: Verifier (autoregressive model) forward passes; one per verify round.
    verify_nfe: int = 0
    #: Tokens proposed by the drafter to the verifier.
    drafted_tokens: int = 0
    #: Proposed tokens the verifier kept.
    accepted_tokens: int = 0
    #: Per request, the mode that served it and why.
    served: list[ServedMode] = field(default_factory=list)

    @property
    def mean_accepted(self) -> float:
        """Draft tokens kept per verify round (the verifier's own token not counted)."""
        return self.accepted_tokens / self.verify_nfe if self.verify_nfe else math.nan

    @property
    def acceptance_rate(self) -> float:
        """Fraction of proposed draft tokens the verifier kept."""
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else math.nan

    def to_dict(self) -> dict[str, object]:
        out = super().to_dict()
        out.update(
            draft_nfe=self.draft_nfe,
            verify_nfe=self.verify_nfe,
            drafted_tokens=self.drafted_tokens,
            accepted_tokens=self.accepted_tokens,
            mean_accepted=None if math.isnan(self.mean_accepted) else self.mean_accepted,
            served=[s.to_dict() for s in self.served],
        )
        return out
