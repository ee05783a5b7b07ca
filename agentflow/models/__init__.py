"""Model back-ends of the runtime."""

from __future__ import annotations

from .base import (
    Action,
    DecodingMode,
    Model,
    StepDelta,
    StepRequest,
    StepResponse,
    StepUsage,
    ToolCall,
)

__all__ = [
    "Action",
    "DecodingMode",
    "Model",
    "StepDelta",
    "StepRequest",
    "StepResponse",
    "StepUsage",
    "ToolCall",
]
