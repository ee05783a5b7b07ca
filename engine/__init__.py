"""The diffusion engine: transformer, checkpoints, tokenizer, samplers, constraints."""

from __future__ import annotations

from .chat_template import ChatMessage, ToolSpec, render_prompt
from .errors import (
    CheckpointError,
    ContextLengthError,
    EngineError,
    InfeasibleConstraintError,
    SchemaError,
    TokenizerMismatchError,
)
from .model import KVCache, ModelConfig, Transformer
from .tokenizer import Tokenizer

__all__ = [
    "ChatMessage",
    "CheckpointError",
    "ContextLengthError",
    "EngineError",
    "InfeasibleConstraintError",
    "KVCache",
    "ModelConfig",
    "SchemaError",
    "Tokenizer",
    "TokenizerMismatchError",
    "ToolSpec",
    "Transformer",
    "render_prompt",
]
