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
from .autoregressive import ARDecoder, causal_forward
from .decode_batch import Segment
from .generation import GenerationConfig, GenerationResult, GenerationStats, RowStats
from .model import KVCache, ModelConfig, Transformer
from .sampler import BlockOutcome, DiffusionEngine, denoise_block
from .tokenizer import Tokenizer

__all__ = [
    "ARDecoder",
    "BlockOutcome",
    "DiffusionEngine",
    "GenerationConfig",
    "GenerationResult",
    "GenerationStats",
    "RowStats",
    "Segment",
    "causal_forward",
    "denoise_block",
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
