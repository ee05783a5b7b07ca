"""The diffusion engine: transformer, checkpoints, tokenizer, samplers, constraints."""

from __future__ import annotations

from .autoregressive import ARDecoder, causal_forward
from .chat_template import ChatMessage, ToolSpec, render_prompt
from .checkpoint_formats import SUPPORTED_FORMATS
from .checkpoints import (
    DEFAULT_MODEL,
    PACKAGED_MODELS,
    LoadedModel,
    load_checkpoint,
    resolve_model_path,
    save_checkpoint,
)
from .decode_batch import Segment
from .errors import (
    CheckpointError,
    ContextLengthError,
    EngineError,
    InfeasibleConstraintError,
    SchemaError,
    TokenizerMismatchError,
)
from .generation import GenerationConfig, GenerationResult, GenerationStats, RowStats
from .hf_chat_template import ChatTemplateError, HFChatTemplate, render_conversation
from .hybrid import HybridEngine, HybridOptions
from .hybrid_stats import HybridStats, ServedMode
from .model import KVCache, ModelConfig, Transformer
from .sampler import BlockOutcome, DiffusionEngine, denoise_block
from .tokenizer import Tokenizer

__all__ = [
    "DEFAULT_MODEL",
    "PACKAGED_MODELS",
    "SUPPORTED_FORMATS",
    "ARDecoder",
    "BlockOutcome",
    "ChatMessage",
    "ChatTemplateError",
    "CheckpointError",
    "ContextLengthError",
    "DiffusionEngine",
    "EngineError",
    "GenerationConfig",
    "GenerationResult",
    "GenerationStats",
    "HFChatTemplate",
    "HybridEngine",
    "HybridOptions",
    "HybridStats",
    "InfeasibleConstraintError",
    "KVCache",
    "LoadedModel",
    "ModelConfig",
    "RowStats",
    "SchemaError",
    "Segment",
    "ServedMode",
    "Tokenizer",
    "TokenizerMismatchError",
    "ToolSpec",
    "Transformer",
    "causal_forward",
    "denoise_block",
    "load_checkpoint",
    "render_conversation",
    "render_prompt",
    "resolve_model_path",
    "save_checkpoint",
]
