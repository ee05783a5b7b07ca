"""Checkpoint loading for every format against a plain reference forward; saving; errors."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from engine_testing import make_config, make_model
from safetensors import safe_open
from safetensors.torch import save_file
from tokenizers import Tokenizer as HFTokenizer

from agentflow.engine import checkpoints
from agentflow.engine.canonical_pairs import PAIRS_FILE
from agentflow.engine.checkpoint_formats import FORMATS, SUPPORTED_FORMATS
from agentflow.engine.checkpoints import load_checkpoint, resolve_model_path, save_checkpoint
from agentflow.engine.errors import CheckpointError
from agentflow.engine.model import Transformer

VOCAB, DIM, LAYERS, HEADS, KV, FFN = 64, 16, 2, 4, 2, 24

Getter = Callable[[str], torch.Tensor]


def _rand(*shape: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(*shape, generator=gen) * 0.3


def llama_layout(fmt: str, gen: torch.Generator) -> tuple[dict, dict[str, torch.Tensor]]:
    """A tiny HF Llama/Qwen2/Dream checkpoint with the real config keys and tensor names."""
    bias = fmt in ("qwen2", "dream")
    config = {
        "architectures": {
            "llama": ["LlamaForCausalLM"],
            "qwen2": ["Qwen2ForCausalLM"],
            "dream": ["DreamModel"],
        }[fmt],
        "model_type": {"llama": "llama", "qwen2": "qwen2", "dream": "Dream"}[fmt],
        "vocab_size": VOCAB,
        "hidden_size": DIM,
        "intermediate_size": FFN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000.0,
        "tie_word_embeddings": False,
        "eos_token_id": 2,
        "pad_token_id": 0,
        "torch_dtype": "bfloat16",
    }
    if fmt == "dream":
        config["mask_token_id"] = 1
    hd = DIM // HEADS
    t = {
        "model.embed_tokens.weight": _rand(VOCAB, DIM, gen=gen),
        "model.norm.weight": 1 + _rand(DIM, gen=gen),
    }
    t["lm_head.weight"] = _rand(VOCAB, DIM, gen=gen)
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        t[f"{p}.input_layernorm.weight"] = 1 + _rand(DIM, gen=gen)
        t[f"{p}.post_attention_layernorm.weight"] = 1 + _rand(DIM, gen=gen)
        for name, out in (("q_proj", HEADS * hd), ("k_proj", KV * hd), ("v_proj", KV * hd)):
            t[f"{p}.self_attn.{name}.weight"] = _rand(out, DIM, gen=gen)
            if bias:
                t[f"{p}.self_attn.{name}.bias"] = _rand(out, gen=gen)
        t[f"{p}.self_attn.o_proj.weight"] = _rand(DIM, HEADS * hd, gen=gen)
        t[f"{p}.mlp.gate_proj.weight"] = _rand(FFN, DIM, gen=gen)
        t[f"{p}.mlp.up_proj.weight"] = _rand(FFN, DIM, gen=gen)
        t[f"{p}.mlp.down_proj.weight"] = _rand(DIM, FFN, gen=gen)
    return config, t


def llada_layout(gen: torch.Generator) -> tuple[dict, dict[str, torch.Tensor]]:
    """A tiny LLaDA checkpoint (OLMo-style names, untied ff_out head)."""
    config = {
        "architectures": ["LLaDAModelLM"],
        "model_type": "llada",
        "d_model": DIM,
        "n_heads": HEADS,
        "n_kv_heads": KV,
        "n_layers": LAYERS,
        "mlp_hidden_size": FFN,
        "vocab_size": VOCAB,
        "embedding_size": VOCAB,
        "max_sequence_length": 128,
        "rope_theta": 1000.0,
        "rms_norm_eps": 1e-5,
        "include_bias": False,
        "include_qkv_bias": False,
        "weight_tying": False,
        "mask_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 2,
    }
    hd = DIM // HEADS
    b = "model.transformer"
    t = {f"{b}.wte.weight": _rand(VOCAB, DIM, gen=gen), f"{b}.ln_f.weight": 1 + _rand(DIM, gen=gen)}
    t[f"{b}.ff_out.weight"] = _rand(VOCAB, DIM, gen=gen)
    for i in range(LAYERS):
        p = f"{b}.blocks.{i}"
        t[f"{p}.attn_norm.weight"] = 1 + _rand(DIM, gen=gen)
        t[f"{p}.ff_norm.weight"] = 1 + _rand(DIM, gen=gen)
        t[f"{p}.q_proj.weight"] = _rand(HEADS * hd, DIM, gen=gen)
        t[f"{p}.k_proj.weight"] = _rand(KV * hd, DIM, gen=gen)
        t[f"{p}.v_proj.weight"] = _rand(KV * hd, DIM, gen=gen)
        t[f"{p}.attn_out.weight"] = _rand(DIM, HEADS * hd, gen=gen)
        t[f"{p}.ff_proj.weight"] = _rand(FFN, DIM, gen=gen)
        t[f"{p}.up_proj.weight"] = _rand(FFN, DIM, gen=gen)
        t[f"{p}.ff_out.weight"] = _rand(DIM, FFN, gen=gen)
    return config, t


def llama_getter(t: dict[str, torch.Tensor]) -> Callable[[int | None, str], torch.Tensor | None]:
    names = {
        "emb": "model.embed_tokens.weight", "final": "model.norm.weight", "head": "lm_head.weight",
        "n1": "input_layernorm.weight", "n2": "post_attention_layernorm.weight",
        "q": "self_attn.q_proj.weight", "k": "self_attn.k_proj.weight", "v": "self_attn.v_proj.weight",
        "o": "self_attn.o_proj.weight", "bq": "self_attn.q_proj.bias", "bk": "self_attn.k_proj.bias",
        "bv": "self_attn.v_proj.bias", "gate": "mlp.gate_proj.weight", "up": "mlp.up_proj.weight",
        "down": "mlp.down_proj.weight",
    }  # fmt: skip
    return lambda i, w: t.get(names[w] if i is None else f"model.layers.{i}.{names[w]}")


def llada_getter(t: dict[str, torch.Tensor]) -> Callable[[int | None, str], torch.Tensor | None]:
    b = "model.transformer"
    names = {
        "emb": "wte.weight", "final": "ln_f.weight", "head": "ff_out.weight",
        "n1": "attn_norm.weight", "n2": "ff_norm.weight", "q": "q_proj.weight",
        "k": "k_proj.weight", "v": "v_proj.weight", "o": "attn_out.weight", "bq": "-", "bk": "-",
        "bv": "-", "gate": "ff_proj.weight", "up": "up_proj.weight", "down": "ff_out.weight",
    }  # fmt: skip
    return lambda i, w: t.get(f"{b}.{names[w]}" if i is None else f"{b}.blocks.{i}.{names[w]}")


def reference_forward(
    w: Callable[[int | None, str], torch.Tensor | None],
    tokens: torch.Tensor,
    *,
    causal: bool,
    eps: float,
    theta: float,
    inv_freq: torch.Tensor | None = None,
) -> torch.Tensor:
    """A plain Llama-family forward (rotate-half RoPE, GQA by repetition, SwiGLU), one sequence;
    ``inv_freq`` replaces the rotation frequencies ``theta`` gives."""

    def rms(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g

    def lin(x: torch.Tensor, i: int, name: str, bias: str | None = None) -> torch.Tensor:
        out = x @ w(i, name).float().T
        b = w(i, bias) if bias else None
        return out if b is None else out + b.float()

    n = tokens.shape[0]
    hd = DIM // HEADS
    inv = 1.0 / theta ** (torch.arange(0, hd, 2).float() / hd) if inv_freq is None else inv_freq
    ang = torch.arange(n).float()[:, None] * inv[None]
    cos, sin = torch.cat((ang.cos(), ang.cos()), -1), torch.cat((ang.sin(), ang.sin()), -1)

    def rope(x: torch.Tensor) -> torch.Tensor:  # x: [H, n, hd]
        rot = torch.cat((-x[..., hd // 2 :], x[..., : hd // 2]), -1)
        return x * cos + rot * sin

    x = w(None, "emb").float()[tokens]
    allowed = torch.ones(n, n, dtype=torch.bool)
    if causal:
        allowed = torch.tril(allowed)
    for i in range(LAYERS):
        h = rms(x, w(i, "n1").float())
        q = rope(lin(h, i, "q", "bq").view(n, HEADS, hd).transpose(0, 1))
        k = rope(lin(h, i, "k", "bk").view(n, KV, hd).transpose(0, 1))
        v = lin(h, i, "v", "bv").view(n, KV, hd).transpose(0, 1)
        k = k.repeat_interleave(HEADS // KV, 0)
        v = v.repeat_interleave(HEADS // KV, 0)
        scores = (q @ k.transpose(1, 2)) / math.sqrt(hd)
        att = scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v
        x = x + lin(att.transpose(0, 1).reshape(n, DIM), i, "o")
        h = rms(x, w(i, "n2").float())
        x = x + lin(torch.nn.functional.silu(lin(h, i, "gate")) * lin(h, i, "up"), i, "down")
    return rms(x, w(None, "final").float()) @ w(None, "head").float().T


def write_folder(
    folder: Path, config: dict, tensors: dict[str, torch.Tensor], hf: HFTokenizer
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    save_file(
        {k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()},
        str(folder / "model.safetensors"),
    )
    hf.save(str(folder / "tokenizer.json"))
    return folder


@pytest.mark.parametrize("fmt", ["llama", "qwen2", "dream", "llada"])
def test_loaded_forward_matches_reference(
    fmt: str, tmp_path: Path, hf_tokenizer: HFTokenizer
) -> None:
    gen = torch.Generator().manual_seed(len(fmt))
    config, tensors = llada_layout(gen) if fmt == "llada" else llama_layout(fmt, gen)
    tensors = {k: v.to(torch.bfloat16) for k, v in tensors.items()}  # what the file will hold
    loaded = load_checkpoint(write_folder(tmp_path / fmt, config, tensors, hf_tokenizer))
    assert loaded.format == fmt
    mc = loaded.config
    assert next(loaded.model.parameters()).dtype == torch.float32
    bidirectional = fmt in ("llada", "dream")
    assert mc.attention == ("bidirectional" if bidirectional else "causal")
    assert mc.logits_shift == (1 if fmt == "dream" else 0)
    assert mc.qkv_bias == (fmt in ("qwen2", "dream"))
    tokens = torch.tensor([5, 9, 3, 17, 40, 2, 33])
    getter = llada_getter(tensors) if fmt == "llada" else llama_getter(tensors)
    expected = reference_forward(
        getter, tokens, causal=not bidirectional, eps=mc.norm_eps, theta=mc.rope_theta
    )
    with torch.no_grad():
        ours = loaded.model(tokens.unsqueeze(0))[0]
    torch.testing.assert_close(ours, expected, atol=2e-4, rtol=2e-4)


def llama3_frequencies(theta: float, scaling: dict) -> torch.Tensor:
    """Llama 3.1's frequency rule, one frequency at a time, as its paper's code states it."""
    hd = DIM // HEADS
    out = []
    context = scaling["original_max_position_embeddings"]
    low_wavelength = context / scaling["low_freq_factor"]
    high_wavelength = context / scaling["high_freq_factor"]
    for i in range(0, hd, 2):
        freq = 1.0 / theta ** (i / hd)
        wavelength = 2 * math.pi / freq
        if wavelength < high_wavelength:
            out.append(freq)
        elif wavelength > low_wavelength:
            out.append(freq / scaling["factor"])
        else:
            smooth = (context / wavelength - scaling["low_freq_factor"]) / (
                scaling["high_freq_factor"] - scaling["low_freq_factor"]
            )
            out.append((1 - smooth) * freq / scaling["factor"] + smooth * freq)
    return torch.tensor(out, dtype=torch.float32)


# theta 1000 and head_dim 4: wavelengths 2*pi and ~199 positions. With a context of
# 256 the long one falls between the two bounds (blended); with 64 it is past both.
ROPE_SCALINGS = {
    "linear": {"type": "linear", "factor": 4.0},
    "llama3-blended": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 256,
    },
    "llama3-divided": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
}


@pytest.mark.parametrize("name", sorted(ROPE_SCALINGS))
def test_rope_scaling_matches_reference(
    name: str, tmp_path: Path, hf_tokenizer: HFTokenizer, tokenizer
) -> None:
    # Llama 3.x checkpoints ship a rope_scaling object; positions must rotate as they trained.
    config, tensors = llama_layout("llama", torch.Generator().manual_seed(3))
    tensors = {k: v.to(torch.bfloat16) for k, v in tensors.items()}
    scaling = ROPE_SCALINGS[name]
    config["rope_scaling"] = scaling
    loaded = load_checkpoint(write_folder(tmp_path / name, config, tensors, hf_tokenizer))
    assert loaded.config.rope_scaling == scaling
    theta = loaded.config.rope_theta
    hd = DIM // HEADS
    if scaling.get("type") == "linear":
        inv = 1.0 / theta ** (torch.arange(0, hd, 2).float() / hd) / scaling["factor"]
    else:
        inv = llama3_frequencies(theta, scaling)
    tokens = torch.tensor([5, 9, 3, 17, 40, 2, 33, 8, 12, 30, 4, 50])
    getter = llama_getter(tensors)
    kw = {"causal": True, "eps": loaded.config.norm_eps, "theta": theta}
    expected = reference_forward(getter, tokens, inv_freq=inv, **kw)
    with torch.no_grad():
        ours = loaded.model(tokens.unsqueeze(0))[0]
    torch.testing.assert_close(ours, expected, atol=2e-4, rtol=2e-4)
    unscaled = reference_forward(getter, tokens, **kw)
    assert (unscaled - expected).abs().max() > 1e-2  # the scaling changes the logits
    # Saved in our format, the scaling travels with the weights.
    again = load_checkpoint(save_checkpoint(loaded.model, tokenizer, tmp_path / f"{name}-ours"))
    assert again.config.rope_scaling == scaling
    with torch.no_grad():
        torch.testing.assert_close(again.model(tokens.unsqueeze(0))[0], ours, atol=3e-2, rtol=0)


def test_unsupported_rope_scaling_is_refused_by_name(
    tmp_path: Path, hf_tokenizer: HFTokenizer
) -> None:
    config, tensors = llama_layout("llama", torch.Generator().manual_seed(0))
    folder = tmp_path / "yarn"
    for scaling, message in (
        ({"rope_type": "yarn", "factor": 4.0}, "'yarn' is not implemented; supported: default"),
        ({"type": "dynamic", "factor": 2.0}, "'dynamic' is not implemented"),
        ({"rope_type": "llama3", "factor": 8.0}, "needs a positive number 'low_freq_factor'"),
        ({"type": "linear", "factor": -1}, "needs a positive number 'factor'"),
    ):
        config["rope_scaling"] = scaling
        write_folder(folder, config, tensors, hf_tokenizer)
        with pytest.raises(CheckpointError, match=message) as info:
            load_checkpoint(folder)
        assert info.value.path == folder / "config.json"
    config["rope_scaling"] = {"rope_type": "default"}  # what some exporters write for none
    write_folder(folder, config, tensors, hf_tokenizer)
    assert load_checkpoint(folder).config.rope_scaling is None


def test_every_end_token_of_a_chat_checkpoint_is_known(
    tmp_path: Path, hf_tokenizer: HFTokenizer
) -> None:
    config, tensors = llama_layout("llama", torch.Generator().manual_seed(0))
    config["eos_token_id"] = [2, 7]  # Llama-3 style: end of text, then end of turn
    folder = write_folder(tmp_path / "chat", config, tensors, hf_tokenizer)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 9]}))
    eot = hf_tokenizer.id_to_token(11)
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": {"content": eot}}))
    mc = load_checkpoint(folder).config
    assert mc.end_token_id == 2 and mc.end_token_ids == {2, 7, 9, 11}
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": VOCAB + 5}))
    with pytest.raises(CheckpointError, match="not in the vocabulary"):
        load_checkpoint(folder)


def test_default_mask_tokens_of_llada_and_dream() -> None:
    gen = torch.Generator().manual_seed(0)
    raw, _ = llada_layout(gen)
    del raw["mask_token_id"]
    assert FORMATS["llada"].parse_config(raw, FORMATS["llada"]).mask_token_id == 126336
    raw, _ = llama_layout("dream", gen)
    del raw["mask_token_id"]
    assert FORMATS["dream"].parse_config(raw, FORMATS["dream"]).mask_token_id == 151666


def test_save_and_reload_our_format(tmp_path: Path, tokenizer) -> None:
    model = make_model(make_config("block", vocab_size=tokenizer.vocab_size))
    folder = save_checkpoint(
        model, tokenizer, tmp_path / "m", tokenizer_config={"chat_template": "{{ 1 }}"}
    )
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        assert all(f.get_tensor(k).dtype == torch.bfloat16 for k in f.keys())  # noqa: SIM118
    loaded = load_checkpoint(folder)
    assert loaded.format == "agentflow" and loaded.config == model.config
    assert loaded.chat_template == "{{ 1 }}"
    assert loaded.tokenizer.mask_id == 1 and loaded.tokenizer.end_id == 2
    rounded = {k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()}
    for k, v in loaded.model.state_dict().items():
        assert torch.equal(v, rounded[k]), k
    fp32 = load_checkpoint(save_checkpoint(model, tokenizer, tmp_path / "f", dtype=torch.float32))
    tokens = torch.tensor([[3, 4, 5, 6]])
    with torch.no_grad():
        torch.testing.assert_close(fp32.model(tokens), model(tokens))


def test_a_checkpoint_saved_with_its_canonical_pairs_loads_them(
    tmp_path: Path, tokenizer, hf_tokenizer
) -> None:
    model = make_model(make_config("block", vocab_size=tokenizer.vocab_size))
    folder = save_checkpoint(model, tokenizer, tmp_path / "m", canonical_pairs=True)
    loaded = load_checkpoint(folder)
    assert loaded.tokenizer.pairs_file == folder / PAIRS_FILE
    assert loaded.tokenizer.canonical_pairs.complete
    # saved again without them, the folder keeps no rows of the tokenizer it held
    save_checkpoint(model, hf_tokenizer, folder)
    assert not (folder / PAIRS_FILE).exists()
    assert load_checkpoint(folder).tokenizer.pairs_file is None


@pytest.fixture
def good_folder(tmp_path: Path, tokenizer) -> Path:
    return save_checkpoint(
        make_model(make_config("block", vocab_size=tokenizer.vocab_size)),
        tokenizer,
        tmp_path / "ok",
    )


def test_missing_files_name_the_file(good_folder: Path) -> None:
    (good_folder / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match=r"tokenizer\.json"):
        load_checkpoint(good_folder)
    (good_folder / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"config\.json") as info:
        load_checkpoint(good_folder)
    assert info.value.path == good_folder / "config.json"


def test_corrupt_files_name_the_file(good_folder: Path) -> None:
    weights = good_folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(CheckpointError, match=r"model\.safetensors") as info:
        load_checkpoint(good_folder)
    assert info.value.path == weights
    (good_folder / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"config\.json"):
        load_checkpoint(good_folder)


def test_missing_tensor_and_wrong_shape(good_folder: Path, tokenizer) -> None:
    config = json.loads((good_folder / "config.json").read_text())
    config["n_layers"] = 3
    (good_folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"layers\.2\."):
        load_checkpoint(good_folder)
    config["n_layers"], config["ffn_dim"] = 2, 65
    (good_folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="shape"):
        load_checkpoint(good_folder)


def test_unknown_format_lists_the_supported_ones(good_folder: Path) -> None:
    (good_folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(good_folder)
    assert all(name in str(info.value) for name in SUPPORTED_FORMATS)
    (good_folder / "config.json").write_text(json.dumps({"format": "onnx"}))
    with pytest.raises(CheckpointError, match="agentflow, llada, dream, llama, qwen2"):
        load_checkpoint(good_folder)


def test_resolve_model_path(
    tmp_path: Path, good_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert resolve_model_path(str(good_folder)) == good_folder
    with pytest.raises(CheckpointError, match="neither a packaged model"):
        resolve_model_path(tmp_path / "nowhere")
    monkeypatch.setattr(checkpoints, "weights_dir", lambda: tmp_path / "weights")
    with pytest.raises(CheckpointError, match="agentflow train"):
        resolve_model_path("agentflow-tiny-dlm")
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "agentflow-tiny-ar").symlink_to(good_folder)
    assert load_checkpoint("agentflow-tiny-ar").format == "agentflow"


def test_loaded_model_is_a_transformer(good_folder: Path) -> None:
    assert isinstance(load_checkpoint(good_folder).model, Transformer)
