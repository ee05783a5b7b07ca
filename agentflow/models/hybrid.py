"""``HybridModel``: the diffusion model drafts, an autoregressive model verifies.

The embedded pair ``agentflow-tiny-dlm`` (drafter) + ``agentflow-tiny-ar``
(verifier) by default. Greedy hybrid output is token-for-token the verifier's own
greedy output, reached in fewer verifier passes. ``mode="auto"`` decodes by
diffusion and re-does a step in hybrid mode when the draft is not trusted; each
step's usage says which mode served it and why (``StepUsage.mode`` / ``reason``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from .embedded import EmbeddedModel


class HybridModel(EmbeddedModel):
    """An :class:`EmbeddedModel` decoding in ``hybrid`` (or ``auto``) mode with an AR verifier."""

    def __init__(
        self,
        drafter: str | Path = "agentflow-tiny-dlm",
        verifier: str | Path = "agentflow-tiny-ar",
        *,
        mode: Literal["hybrid", "auto"] = "hybrid",
        **kwargs: Any,
    ) -> None:
        if mode not in ("hybrid", "auto"):
            raise ValueError(f"HybridModel mode must be 'hybrid' or 'auto', got {mode!r}")
        super().__init__(drafter, verifier=verifier, mode=mode, **kwargs)
