"""Usage of a run: the sum of its steps' model usage plus tool time and wall time."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .models.base import StepUsage


@dataclass
class RunUsage:
    """Totals over the steps of one run (or of several runs, via :meth:`add_run`)."""

    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    forward_passes: int = 0
    forced_tokens: int = 0
    #: Input tokens copied from a prompt cache instead of read (part of ``input_tokens``).
    cached_input_tokens: int = 0
    #: Seconds spent inside the model's steps.
    model_seconds: float = 0.0
    #: Seconds spent running tools (wall time of each step's tool phase).
    tool_seconds: float = 0.0
    tool_calls: int = 0
    #: How many steps each decoding mode served, e.g. ``{"diffusion": 3, "hybrid": 1}``.
    modes: Counter[str] = field(default_factory=Counter)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add_step(self, usage: StepUsage) -> None:
        """Count one model step."""
        self.steps += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.forward_passes += usage.forward_passes
        self.forced_tokens += usage.forced_tokens
        self.cached_input_tokens += usage.cached_input_tokens
        self.model_seconds += usage.seconds
        if usage.mode:
            self.modes[usage.mode] += 1

    def add_run(self, other: RunUsage) -> None:
        """Fold another run's usage into this one (sub-agents, pipelines)."""
        self.steps += other.steps
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.forward_passes += other.forward_passes
        self.forced_tokens += other.forced_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.model_seconds += other.model_seconds
        self.tool_seconds += other.tool_seconds
        self.tool_calls += other.tool_calls
        self.modes.update(other.modes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return {
            "steps": self.steps,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "forward_passes": self.forward_passes,
            "forced_tokens": self.forced_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "model_seconds": self.model_seconds,
            "tool_seconds": self.tool_seconds,
            "tool_calls": self.tool_calls,
            "modes": dict(self.modes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunUsage:
        """Inverse of :meth:`to_dict`."""
        return cls(
            steps=int(data.get("steps", 0)),
            input_tokens=int(data.get("input_tokens", 0)),
            output_tokens=int(data.get("output_tokens", 0)),
            forward_passes=int(data.get("forward_passes", 0)),
            forced_tokens=int(data.get("forced_tokens", 0)),
            cached_input_tokens=int(data.get("cached_input_tokens", 0)),
            model_seconds=float(data.get("model_seconds", 0.0)),
            tool_seconds=float(data.get("tool_seconds", 0.0)),
            tool_calls=int(data.get("tool_calls", 0)),
            modes=Counter(data.get("modes", {})),
        )
