"""Transformer and KVCache: visibility rule, exact block cache, padding, growth and rollback."""

from __future__ import annotations

import pytest
import torch
from engine_testing import make_config, make_model

from agentflow.engine.model import KVCache, ModelConfig, Transformer

P, B = 5, 4  # prompt length, block length


def block_layout(n_blocks: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions and block ids of a causal prompt followed by ``n_blocks`` blocks."""
    pos = torch.arange(P + n_blocks * B)
    ids = torch.cat((torch.arange(P), P + torch.arange(n_blocks).repeat_interleave(B)))
    return pos.unsqueeze(0), ids.unsqueeze(0)


@torch.no_grad()
def test_block_cache_equals_no_cache(block_model: Transformer) -> None:
    torch.manual_seed(0)
    tokens = torch.randint(3, 96, (1, P + 3 * B))
    pos, ids = block_layout(3)
    full = block_model(tokens, positions=pos, block_ids=ids)
    cache = KVCache(block_model.config, 1, 64)
    # Prompt + block 0 first (commit the prompt), then [block 0 + block 1] (commit block 0), ...
    start, outs = 0, []
    for k in range(3):
        end = P + (k + 1) * B
        commit = P if k == 0 else B
        logits = block_model(
            tokens[:, start:end], positions=pos[:, start:end], block_ids=ids[:, start:end],
            cache=cache, commit_len=commit,
        )  # fmt: skip
        outs.append(logits[:, -B:])
        start += commit
    torch.testing.assert_close(torch.cat(outs, 1), full[:, P:], atol=1e-6, rtol=1e-6)
    assert cache.length == P + 2 * B


@torch.no_grad()
def test_visibility_follows_the_attention_mode() -> None:
    tokens = torch.randint(3, 96, (1, 8))
    changed = tokens.clone()
    changed[0, 6] = (changed[0, 6] + 1) % 96
    for mode, later_changes_earlier in (("causal", False), ("bidirectional", True)):
        m = make_model(make_config(mode))  # type: ignore[arg-type]
        a, b = m(tokens), m(changed)
        assert torch.equal(a[0, :6], b[0, :6]) != later_changes_earlier
    m = make_model(make_config("block"))
    ids = torch.tensor([[0, 1, 2, 3, 4, 4, 4, 4]])
    a, b = m(tokens, block_ids=ids), m(changed, block_ids=ids)
    assert torch.equal(a[0, :4], b[0, :4])  # earlier blocks do not see the block
    assert not torch.allclose(a[0, 4], b[0, 4])  # but positions inside it do


@torch.no_grad()
def test_left_padding_does_not_change_a_row(causal_model: Transformer) -> None:
    row = torch.tensor([[7, 8, 9, 10]])
    padded = torch.tensor([[0, 0, 7, 8, 9, 10]])
    valid = padded != 0
    pos = (torch.arange(6) - 2).clamp(min=0).unsqueeze(0)
    alone = causal_model(row)
    batched = causal_model(padded, positions=pos, valid=valid)
    torch.testing.assert_close(batched[:, 2:], alone, atol=1e-5, rtol=1e-5)
    assert torch.isfinite(batched).all()


@torch.no_grad()
def test_gqa_equals_repeated_kv_heads() -> None:
    gqa = make_model(make_config("causal", n_heads=4, n_kv_heads=2))
    mha = Transformer(make_config("causal", n_heads=4, n_kv_heads=4))
    state = gqa.state_dict()
    hd = gqa.config.head_dim
    for i in range(gqa.config.n_layers):
        for name in ("wk", "wv"):
            w = state[f"layers.{i}.attention.{name}.weight"].view(2, hd, -1)
            state[f"layers.{i}.attention.{name}.weight"] = w.repeat_interleave(2, 0).reshape(
                4 * hd, -1
            )
    mha.load_state_dict(state)
    tokens = torch.randint(3, 96, (2, 7))
    torch.testing.assert_close(mha(tokens), gqa(tokens), atol=1e-5, rtol=1e-5)


def test_qkv_bias_and_tied_embeddings_change_the_parameters() -> None:
    plain = Transformer(make_config("causal"))
    biased = Transformer(make_config("causal", qkv_bias=True, tie_embeddings=True))
    names = set(biased.state_dict())
    assert "layers.0.attention.wq.bias" in names and "output.weight" not in names
    assert "output.weight" in plain.state_dict()


def test_cache_truncate_reserve_and_select_rows(causal_model: Transformer) -> None:
    cache = KVCache(causal_model.config, 3, 4)
    with torch.no_grad():
        causal_model(torch.randint(3, 96, (3, 4)), cache=cache, commit_len=4)
        with pytest.raises(ValueError, match="overflow"):
            causal_model(torch.randint(3, 96, (3, 1)), cache=cache, commit_len=1)
    snapshot = cache.k[:, :, :, :4].clone()
    cache.reserve(10)
    assert cache.max_len == 10 and torch.equal(cache.k[:, :, :, :4], snapshot)
    cache.select_rows(torch.tensor([2, 0]))
    assert cache.batch_size == 2 and torch.equal(cache.k[:, 0, :, :4], snapshot[:, 2])
    cache.truncate(1)
    assert cache.length == 1 and not cache.valid[:, 1:].any()
    with pytest.raises(ValueError, match="truncate"):
        cache.truncate(5)


def test_config_round_trips_through_a_dict() -> None:
    cfg = make_config("bidirectional", logits_shift=1)
    assert ModelConfig.from_dict({**cfg.to_dict(), "format": "agentflow"}) == cfg


def test_a_model_built_on_the_meta_device_initializes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Checkpoints are built on "meta" and then assigned their weights; a random init
    # there is wasted, and normal_ on meta tensors imports torch._dynamo (seconds).
    def refuse(tensor: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        raise AssertionError(f"normal_ called on a {tensor.device.type} tensor")

    monkeypatch.setattr(torch.nn.init, "normal_", refuse)
    with torch.device("meta"):
        model = Transformer(make_config("block"))
    assert {p.device.type for p in model.parameters()} == {"meta"}
    monkeypatch.undo()
    # Built on the CPU, the embedding keeps nn.Embedding's standard-normal init.
    weight = Transformer(make_config("block", vocab_size=4096)).tok_embeddings.weight
    assert weight.requires_grad and 0.9 < float(weight.detach().std()) < 1.1
