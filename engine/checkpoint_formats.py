"""Per-format knowledge of checkpoint folders: config keys and weight names.

Every format maps onto the one :class:`~agentflow.engine.model.Transformer`;
only the names of its config keys and tensors differ. Our own parameter names
are ``tok_embeddings``, ``layers.{i}.attention.{wq,wk,wv,wo}``,
``layers.{i}.feed_forward.{w1 (gate), w3 (up), w2 (down)}``,
``layers.{i}.{attention_norm,ffn_norm}``, ``norm`` and ``output``.

- ``agentflow``: our format; ``config.json`` holds ``"format": "agentflow"`` and
  the :class:`ModelConfig` fields; tensors carry our own names.
- ``llada``: LLaDA-8B (``model_type: "llada"``): OLMo-style names
  (``model.transformer.blocks.{i}.q_proj``, ``attn_out``, ``ff_proj`` = gate,
  ``up_proj``, ``ff_out`` = down, untied head ``model.transformer.ff_out``),
  bidirectional, mask token 126336.
- ``dream``: Dream-7B (``model_type: "Dream"``): Qwen2 names, bidirectional,
  logits shifted by one, mask token 151666.
- ``llama`` / ``qwen2``: autoregressive HF checkpoints (Qwen2 has qkv biases).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .errors import CheckpointError
from .model import AttentionMode, ModelConfig, Transformer
from .rope import check_rope_scaling, scaling_type

SUPPORTED_FORMATS: tuple[str, ...] = ("agentflow", "llada", "dream", "llama", "qwen2")

#: ``model_type`` values of HF configs → our format names.
_MODEL_TYPES = {"llada": "llada", "dream": "dream", "llama": "llama", "qwen2": "qwen2"}


def _ids(value: Any) -> tuple[int, ...]:
    """Every id of a config value that may be an int, a list of ints, or missing."""
    if isinstance(value, list):
        return tuple(int(v) for v in value)
    return () if value is None else (int(value),)


def _first(value: Any) -> int | None:
    """The first id of such a value, or None."""
    ids = _ids(value)
    return ids[0] if ids else None


def _require(raw: Mapping[str, Any], key: str, fmt: str) -> Any:
    if key not in raw:
        raise CheckpointError(f"config.json of a {fmt!r} checkpoint lacks the key {key!r}")
    return raw[key]


@dataclass(frozen=True)
class CheckpointFormat:
    """How to read one checkpoint format."""

    name: str
    attention: AttentionMode
    logits_shift: int
    default_mask_token_id: int | None
    parse_config: Callable[[Mapping[str, Any], CheckpointFormat], ModelConfig]
    tensor_names: Callable[[ModelConfig], dict[str, str]]


def _agentflow_config(raw: Mapping[str, Any], fmt: CheckpointFormat) -> ModelConfig:
    for key in ("vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "ffn_dim"):
        _require(raw, key, fmt.name)
    return ModelConfig.from_dict(dict(raw))


def _agentflow_names(config: ModelConfig) -> dict[str, str]:
    # Our own names map to themselves; building on "meta" allocates nothing.
    with torch.device("meta"):
        names = list(Transformer(config).state_dict())
    return {n: n for n in names}


def _llada_config(raw: Mapping[str, Any], fmt: CheckpointFormat) -> ModelConfig:
    n_heads = int(_require(raw, "n_heads", fmt.name))
    dim = int(_require(raw, "d_model", fmt.name))
    mask = raw.get("mask_token_id", fmt.default_mask_token_id)
    return ModelConfig(
        vocab_size=int(raw.get("embedding_size") or _require(raw, "vocab_size", fmt.name)),
        dim=dim,
        n_layers=int(_require(raw, "n_layers", fmt.name)),
        n_heads=n_heads,
        n_kv_heads=int(raw.get("n_kv_heads") or n_heads),
        ffn_dim=int(_require(raw, "mlp_hidden_size", fmt.name)),
        max_seq_len=int(raw.get("max_sequence_length", 4096)),
        rope_theta=float(raw.get("rope_theta", 10000.0)),
        norm_eps=float(raw.get("rms_norm_eps", 1e-5)),
        qkv_bias=bool(raw.get("include_qkv_bias", False) or raw.get("include_bias", False)),
        tie_embeddings=bool(raw.get("weight_tying", False)),
        attention=fmt.attention,
        block_length=32,
        mask_token_id=_first(mask),
        end_token_id=_first(raw.get("eos_token_id")),
        extra_end_token_ids=_ids(raw.get("eos_token_id"))[1:],
        pad_token_id=_first(raw.get("pad_token_id")),
        logits_shift=fmt.logits_shift,
    )


def _llada_names(config: ModelConfig) -> dict[str, str]:
    t = "model.transformer"
    names = {"tok_embeddings.weight": f"{t}.wte.weight", "norm.weight": f"{t}.ln_f.weight"}
    if not config.tie_embeddings:
        names["output.weight"] = f"{t}.ff_out.weight"
    for i in range(config.n_layers):
        ours, theirs = f"layers.{i}", f"{t}.blocks.{i}"
        names[f"{ours}.attention_norm.weight"] = f"{theirs}.attn_norm.weight"
        names[f"{ours}.ffn_norm.weight"] = f"{theirs}.ff_norm.weight"
        for a, b in (("wq", "q_proj"), ("wk", "k_proj"), ("wv", "v_proj")):
            names[f"{ours}.attention.{a}.weight"] = f"{theirs}.{b}.weight"
            if config.qkv_bias:
                names[f"{ours}.attention.{a}.bias"] = f"{theirs}.{b}.bias"
        names[f"{ours}.attention.wo.weight"] = f"{theirs}.attn_out.weight"
        names[f"{ours}.feed_forward.w1.weight"] = f"{theirs}.ff_proj.weight"
        names[f"{ours}.feed_forward.w3.weight"] = f"{theirs}.up_proj.weight"
        names[f"{ours}.feed_forward.w2.weight"] = f"{theirs}.ff_out.weight"
    return names


def _hf_config(raw: Mapping[str, Any], fmt: CheckpointFormat) -> ModelConfig:
    scaling = raw.get("rope_scaling") or None
    check_rope_scaling(scaling)  # ValueError: the loader names config.json
    if scaling is not None and scaling_type(scaling) == "default":
        scaling = None
    n_heads = int(_require(raw, "num_attention_heads", fmt.name))
    dim = int(_require(raw, "hidden_size", fmt.name))
    if raw.get("head_dim") not in (None, dim // n_heads):
        raise CheckpointError(
            f"config.json sets head_dim={raw['head_dim']}, but only hidden_size / num_attention_heads"
            f" = {dim // n_heads} is supported"
        )
    qkv_bias = fmt.name in ("qwen2", "dream") or bool(raw.get("attention_bias", False))
    mask = raw.get("mask_token_id", fmt.default_mask_token_id)
    return ModelConfig(
        vocab_size=int(_require(raw, "vocab_size", fmt.name)),
        dim=dim,
        n_layers=int(_require(raw, "num_hidden_layers", fmt.name)),
        n_heads=n_heads,
        n_kv_heads=int(raw.get("num_key_value_heads") or n_heads),
        ffn_dim=int(_require(raw, "intermediate_size", fmt.name)),
        max_seq_len=int(raw.get("max_position_embeddings", 2048)),
        rope_theta=float(raw.get("rope_theta", 10000.0)),
        rope_scaling=None if scaling is None else dict(scaling),
        norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        qkv_bias=qkv_bias,
        tie_embeddings=bool(raw.get("tie_word_embeddings", False)),
        attention=fmt.attention,
        block_length=32,
        mask_token_id=_first(mask),
        end_token_id=_first(raw.get("eos_token_id")),
        extra_end_token_ids=_ids(raw.get("eos_token_id"))[1:],
        pad_token_id=_first(raw.get("pad_token_id")),
        logits_shift=fmt.logits_shift,
    )


def _hf_names(config: ModelConfig) -> dict[str, str]:
    names = {
        "tok_embeddings.weight": "model.embed_tokens.weight",
        "norm.weight": "model.norm.weight",
    }
    if not config.tie_embeddings:
        names["output.weight"] = "lm_head.weight"
    for i in range(config.n_layers):
        ours, theirs = f"layers.{i}", f"model.layers.{i}"
        names[f"{ours}.attention_norm.weight"] = f"{theirs}.input_layernorm.weight"
        names[f"{ours}.ffn_norm.weight"] = f"{theirs}.post_attention_layernorm.weight"
        for a, b in (("wq", "q_proj"), ("wk", "k_proj"), ("wv", "v_proj"), ("wo", "o_proj")):
            names[f"{ours}.attention.{a}.weight"] = f"{theirs}.self_attn.{b}.weight"
            if config.qkv_bias and a != "wo":
                names[f"{ours}.attention.{a}.bias"] = f"{theirs}.self_attn.{b}.bias"
        for a, b in (("w1", "gate_proj"), ("w3", "up_proj"), ("w2", "down_proj")):
            names[f"{ours}.feed_forward.{a}.weight"] = f"{theirs}.mlp.{b}.weight"
    return names


FORMATS: dict[str, CheckpointFormat] = {
    "agentflow": CheckpointFormat(
        "agentflow", "block", 0, None, _agentflow_config, _agentflow_names
    ),
    "llada": CheckpointFormat("llada", "bidirectional", 0, 126336, _llada_config, _llada_names),
    "dream": CheckpointFormat("dream", "bidirectional", 1, 151666, _hf_config, _hf_names),
    "llama": CheckpointFormat("llama", "causal", 0, None, _hf_config, _hf_names),
    "qwen2": CheckpointFormat("qwen2", "causal", 0, None, _hf_config, _hf_names),
}

#: Tensors some exporters add that carry no weights of ours (recomputed RoPE tables).
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


def detect_format(raw: Mapping[str, Any], *, source: str = "config.json") -> CheckpointFormat:
    """The format of a checkpoint from its ``config.json`` contents."""
    if "format" in raw:
        name = str(raw["format"])
    else:
        model_type = str(raw.get("model_type", "")).lower()
        name = _MODEL_TYPES.get(model_type, "")
        if not name:
            archs = " ".join(map(str, raw.get("architectures", []))).lower()
            name = next((f for f in ("llada", "dream") if f in archs), "")
        if not name:
            raise CheckpointError(
                f"{source}: unknown checkpoint format (model_type={raw.get('model_type')!r});"
                f" supported formats: {', '.join(SUPPORTED_FORMATS)}",
                path=source,
            )
    if name not in FORMATS:
        raise CheckpointError(
            f"{source}: unknown checkpoint format {name!r}; supported formats: {', '.join(SUPPORTED_FORMATS)}",
            path=source,
        )
    return FORMATS[name]
