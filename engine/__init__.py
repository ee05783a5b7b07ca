"""The diffusion engine: transformer, checkpoints, tokenizer, samplers, constraints."""

from __future__ import annotations

from ._lazy_exports import lazy_exports

# Public names, imported on first use: ``import agentflow`` must not pay for torch.
_EXPORTS: dict[str, str] = {
    "ARDecoder": ".autoregressive",
    "causal_forward": ".autoregressive",
    "ChatMessage": ".chat_template",
    "ToolSpec": ".chat_template",
    "render_prompt": ".chat_template",
    "SUPPORTED_FORMATS": ".checkpoint_formats",
    "DEFAULT_MODEL": ".checkpoints",
    "LoadedModel": ".checkpoints",
    "PACKAGED_MODELS": ".checkpoints",
    "load_checkpoint": ".checkpoints",
    "resolve_model_path": ".checkpoints",
    "save_checkpoint": ".checkpoints",
    "Segment": ".decode_batch",
    "CheckpointError": ".errors",
    "ContextLengthError": ".errors",
    "EngineError": ".errors",
    "InfeasibleConstraintError": ".errors",
    "SchemaError": ".errors",
    "TokenizerMismatchError": ".errors",
    "GenerationConfig": ".generation",
    "GenerationResult": ".generation",
    "GenerationStats": ".generation",
    "MadeChoice": ".generation",
    "RowStats": ".generation",
    "SecondChoice": ".generation",
    "ChatTemplateError": ".hf_chat_template",
    "HFChatTemplate": ".hf_chat_template",
    "render_conversation": ".hf_chat_template",
    "HybridEngine": ".hybrid",
    "HybridOptions": ".hybrid_options",
    "HybridStats": ".hybrid_stats",
    "ServedMode": ".hybrid_stats",
    "KVCache": ".model",
    "ModelConfig": ".model",
    "Transformer": ".model",
    "BlockOutcome": ".sampler",
    "DiffusionEngine": ".sampler",
    "denoise_block": ".block_denoising",
    "Tokenizer": ".tokenizer",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
