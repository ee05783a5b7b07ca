"""Model back-ends of the runtime.

``TestModel`` and ``FunctionModel`` are always available; ``EmbeddedModel``,
``HybridModel`` and ``OpenAIModel`` are imported on first use so ``import agentflow``
does not load the engine or an HTTP stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import (
    Action,
    ActionParseError,
    DecodingMode,
    Model,
    StepDelta,
    StepRequest,
    StepResponse,
    StepUsage,
    ToolCall,
    action_from_json,
    parse_action,
)
from .test import FunctionModel, TestModel

if TYPE_CHECKING:
    from .embedded import EmbeddedModel
    from .hybrid import HybridModel
    from .openai import OpenAIModel

_LAZY = {
    "EmbeddedModel": ".embedded",
    "HybridModel": ".hybrid",
    "OpenAIModel": ".openai",
}

#: The embedded model an ``Agent`` uses when it is given none.
DEFAULT_MODEL = "agentflow-tiny-dlm"


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def infer_model(spec: str | None) -> Model:
    """A model from a short spec: None / ``"embedded"`` (the default embedded model), ``"hybrid"``,
    ``"test"``, ``"openai:<model>"``, or an embedded model name or checkpoint path."""
    if spec == "test":
        return TestModel()
    if spec == "hybrid":
        from .hybrid import HybridModel

        return HybridModel()
    if spec is not None and spec.startswith("openai:"):
        from .openai import OpenAIModel

        return OpenAIModel(spec.removeprefix("openai:"))
    from .embedded import EmbeddedModel

    return EmbeddedModel(DEFAULT_MODEL if spec in (None, "embedded") else spec)


__all__ = [
    "DEFAULT_MODEL",
    "Action",
    "ActionParseError",
    "DecodingMode",
    "EmbeddedModel",
    "FunctionModel",
    "HybridModel",
    "Model",
    "OpenAIModel",
    "StepDelta",
    "StepRequest",
    "StepResponse",
    "StepUsage",
    "TestModel",
    "ToolCall",
    "action_from_json",
    "infer_model",
    "parse_action",
]
