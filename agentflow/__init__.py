"""agentflow: agent workflows on an embedded diffusion language model."""

from __future__ import annotations

__version__ = "0.1.0"

from .agent import Agent
from .context import RunContext
from .durable import RunStore
from .errors import (
    AgentflowError,
    MaxStepsExceeded,
    ModelBehaviorError,
    RunError,
    RunNotFoundError,
    RunStateError,
    ToolDefinitionError,
    ToolTimeoutError,
)
from .events import (
    AgentEvent,
    DraftText,
    Event,
    FinalEvent,
    HandoffEvent,
    RetryEvent,
    RunFailed,
    RunStart,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
)
from .handoffs import agent_tool, handoff
from .models import (
    Action,
    FunctionModel,
    Model,
    StepRequest,
    StepResponse,
    StepUsage,
    TestModel,
    ToolCall,
)
from .pipeline import PipelineResult, RouteError, fan_out, router, sequence
from .result import RunResult, StepRecord, ToolOutcome
from .tool import Tool, tool
from .tracing import Tracer
from .usage import RunUsage

__all__ = [
    "Action",
    "Agent",
    "AgentEvent",
    "AgentflowError",
    "DraftText",
    "Event",
    "FinalEvent",
    "FunctionModel",
    "HandoffEvent",
    "MaxStepsExceeded",
    "Model",
    "ModelBehaviorError",
    "PipelineResult",
    "RetryEvent",
    "RouteError",
    "RunContext",
    "RunError",
    "RunFailed",
    "RunNotFoundError",
    "RunResult",
    "RunStart",
    "RunStateError",
    "RunStore",
    "RunUsage",
    "StepEnd",
    "StepRecord",
    "StepRequest",
    "StepResponse",
    "StepStart",
    "StepUsage",
    "TestModel",
    "Tool",
    "ToolCall",
    "ToolCallEvent",
    "ToolDefinitionError",
    "ToolOutcome",
    "ToolResultEvent",
    "ToolTimeoutError",
    "Tracer",
    "__version__",
    "agent_tool",
    "fan_out",
    "handoff",
    "router",
    "sequence",
    "tool",
]


def __getattr__(name: str) -> object:
    # The engine-backed and remote models load on first use (see agentflow.models).
    if name in ("EmbeddedModel", "HybridModel", "OpenAIModel"):
        from . import models

        return getattr(models, name)
    raise AttributeError(f"module 'agentflow' has no attribute {name!r}")
