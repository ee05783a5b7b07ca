"""agentflow: agent workflows on an embedded diffusion language model."""

from __future__ import annotations

__version__ = "0.1.0"
