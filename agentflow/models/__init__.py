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
from .openai import OpenAIModel

__all__ = [
    "Action",
    "DecodingMode",
    "Model",
    "OpenAIModel",
    "StepDelta",
    "StepRequest",
    "StepResponse",
    "StepUsage",
    "ToolCall",
]
