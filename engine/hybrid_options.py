"""The knobs of hybrid decoding's draft/verify loop and of its ``auto`` policy."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class HybridOptions:
    """Knobs of the draft/verify loop and of the ``auto`` policy."""

    #: Shortest and longest draft; ``max_draft=None`` means the config's ``block_length``.
    min_draft: int = 2
    max_draft: int | None = None
    #: ``auto`` falls back to hybrid when a committed token's confidence is below this.
    min_confidence: float = 0.5
    #: ``auto`` keeps the diffusion blocks committed at or above ``min_confidence`` and
    #: goes on in hybrid mode from the first block below it (faster; measured slightly
    #: less accurate with the embedded pair, docs/hybrid.md); False re-does the whole
    #: step in hybrid mode.
    keep_confident: bool = False
    #: Denoising steps per greedy draft (None: the config's ``steps``/``threshold`` rule).
    #: 1 is a one-pass draft (:meth:`Drafter.parallel`). The verifier corrects every
    #: draft, so a cheap draft usually wins: on a partly trained pair one step kept as
    #: many tokens per verify as the full schedule at a quarter of the drafter's passes.
    draft_steps: int | None = 1
    #: Let the verifier decode alone while drafting does not pay (the rule of
    #: :mod:`.hybrid_schedule`); False drafts every round.
    adaptive: bool = True
    #: Verifier-only steps before drafting is probed again; doubled after each failed
    #: probe up to ``max_probe_interval``, reset by a probe that pays.
    probe_interval: int = 4
    max_probe_interval: int = 64
    #: The clock the scheduler measures each path's cost with (``time.process_time``
    #: gives steadier figures on a CPU shared with other work, with one torch thread).
    clock: Callable[[], float] = time.perf_counter
    #: Prompts whose keys and values each model keeps for later prompts that start the
    #: same way (an agent's next step, an ``auto`` step re-done in hybrid mode;
    #: :mod:`.prefix_store`); 0 reads every prompt whole. Each kept prompt holds its
    #: keys and values: layers × kv heads × head dim × 2 values per token (2 kB per
    #: token for the embedded models, 128 kB in bf16 for a Llama-3-8B verifier).
    prompt_cache: int = 8

    def __post_init__(self) -> None:
        if self.draft_steps is not None and self.draft_steps < 1:
            raise ValueError(f"draft_steps must be >= 1 or None, got {self.draft_steps}")
        if self.min_draft < 1:
            raise ValueError(f"min_draft must be >= 1, got {self.min_draft}")
        if self.max_draft is not None and self.max_draft < self.min_draft:
            raise ValueError(f"max_draft ({self.max_draft}) is below min_draft ({self.min_draft})")
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be in [0, 1], got {self.min_confidence}")
        if self.prompt_cache < 0:
            raise ValueError(f"prompt_cache must be >= 0, got {self.prompt_cache}")
        if not 1 <= self.probe_interval <= self.max_probe_interval:
            raise ValueError(
                f"need 1 <= probe_interval ({self.probe_interval}) <= max_probe_interval "
                f"({self.max_probe_interval})"
            )
