"""constrained_select: Triton (interpreted on the CPU) against the reference, and the semantics."""

from __future__ import annotations

import importlib

import pytest
import torch

from agentflow.kernels import (
    KernelBackendError,
    constrained_select,
    constrained_select_reference,
    pack_bits,
    unpack_bits,
)

pytestmark = pytest.mark.triton


def _inputs(
    n: int,
    v: int,
    density: float,
    seed: int,
    device: torch.device,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(n, v, generator=g) * 3).to(dtype)
    allowed = torch.rand(n, v, generator=g) < density
    allowed[:, int(torch.randint(0, v, (1,), generator=g))] = True
    return logits.to(device), pack_bits(allowed).to(device)


def _masked_softmax(
    logits: torch.Tensor, allowed: torch.Tensor, temperature: float
) -> torch.Tensor:
    scores = logits.float() / (temperature if temperature > 0 else 1.0)
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1)


@pytest.mark.parametrize("v", [1, 31, 33, 1000, 5000])
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_triton_matches_reference(
    v: int, temperature: float, device: torch.device, triton_ok: None
) -> None:
    logits, allowed = _inputs(6, v, 0.3, v, device)
    for mask in (allowed, None):
        tri = constrained_select(logits, mask, temperature, 1234, backend="triton")
        ref = constrained_select(logits, mask, temperature, 1234, backend="torch")
        assert torch.equal(tri[0], ref[0])
        torch.testing.assert_close(tri[1], ref[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_logits(dtype: torch.dtype, device: torch.device, triton_ok: None) -> None:
    logits, allowed = _inputs(5, 300, 0.5, 7, device, dtype)
    tri = constrained_select(logits, allowed, 0.0, None, backend="triton")
    ref = constrained_select(logits, allowed, 0.0, None, backend="torch")
    assert torch.equal(tri[0], ref[0])
    torch.testing.assert_close(tri[1], ref[1], rtol=1e-5, atol=1e-6)
    full = unpack_bits(allowed.cpu(), 300)
    assert bool(full[torch.arange(5), ref[0].cpu()].all())


def test_single_and_no_allowed_token(device: torch.device, triton_ok: None) -> None:
    v = 70
    logits = torch.randn(3, v, device=device)
    allowed = torch.zeros(3, v, dtype=torch.bool)
    allowed[0, 65] = True  # exactly one token: it is chosen with confidence 1
    allowed[2, :] = True
    mask = pack_bits(allowed).to(device)
    for backend in ("triton", "torch"):
        for temperature in (0.0, 1.5):
            tok, conf = constrained_select(logits, mask, temperature, 9, backend=backend)
            assert tok[0].item() == 65
            assert conf[0].item() == pytest.approx(1.0)
            assert tok[1].item() == -1  # nothing allowed: defined as token -1, confidence 0
            assert conf[1].item() == 0.0
            assert 0 <= tok[2].item() < v


def test_minus_inf_logits_are_never_chosen(device: torch.device, triton_ok: None) -> None:
    logits = torch.full((2, 40), float("-inf"), device=device)
    logits[1, 17] = 0.5
    for backend in ("triton", "torch"):
        tok, conf = constrained_select(logits, None, 0.7, 3, backend=backend)
        assert tok.tolist() == [-1, 17]
        assert conf.tolist() == [0.0, 1.0]


def test_greedy_is_masked_argmax_and_confidence_is_masked_probability(
    device: torch.device, triton_ok: None
) -> None:
    logits, allowed = _inputs(8, 257, 0.2, 11, device)
    full = unpack_bits(allowed.cpu(), 257)
    probs = _masked_softmax(logits.cpu(), full, 0.0)
    for backend in ("triton", "torch"):
        tok, conf = constrained_select(logits, allowed, 0.0, None, backend=backend)
        expect_p, expect_t = probs.max(dim=-1)
        assert torch.equal(tok.cpu(), expect_t)
        torch.testing.assert_close(conf.cpu(), expect_p, rtol=1e-5, atol=1e-6)


def test_ties_pick_the_lowest_id(device: torch.device, triton_ok: None) -> None:
    logits = torch.zeros(1, 5000, device=device)
    logits[0, [4100, 300, 4999]] = 2.0
    for backend in ("triton", "torch"):
        assert constrained_select(logits, None, 0.0, None, backend=backend)[0].item() == 300


def test_large_n(device: torch.device, triton_ok: None) -> None:
    n = 8192 if device.type == "cuda" else 96  # the interpreter runs programs one by one
    logits, allowed = _inputs(n, 40, 0.3, 5, device)
    tri = constrained_select(logits, allowed, 1.0, 77, backend="triton")
    ref = constrained_select(logits, allowed, 1.0, 77, backend="torch")
    assert torch.equal(tri[0], ref[0])
    torch.testing.assert_close(tri[1], ref[1], rtol=1e-5, atol=1e-6)


def test_fixed_seed_reproduces_and_seeds_differ(device: torch.device, triton_ok: None) -> None:
    logits = torch.zeros(12, 50, device=device)  # uniform: the token is pure noise
    for backend in ("triton", "torch"):
        a = constrained_select(logits, None, 1.0, 2024, backend=backend)[0]
        b = constrained_select(logits, None, 1.0, 2024, backend=backend)[0]
        c = constrained_select(logits, None, 1.0, 2025, backend=backend)[0]
        assert torch.equal(a, b)
        assert not torch.equal(a, c)


def test_unseeded_sampling_follows_torch_manual_seed() -> None:
    logits = torch.zeros(32, 50)
    torch.manual_seed(5)
    a = constrained_select(logits, None, 1.0, None)[0]
    torch.manual_seed(5)
    b = constrained_select(logits, None, 1.0, None)[0]
    assert torch.equal(a, b)


def test_sampling_follows_the_masked_tempered_distribution() -> None:
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0, 9.0]]).repeat(6000, 1)
    allowed = pack_bits(torch.tensor([[True, True, True, True, False]]).repeat(6000, 1))
    tok, conf = constrained_select_reference(logits, allowed, 2.0, 99)
    expect = torch.softmax(torch.tensor([0.0, 1.0, 2.0, 3.0]) / 2.0, dim=0)
    freq = torch.bincount(tok, minlength=5).float() / tok.numel()
    assert freq[4].item() == 0.0
    torch.testing.assert_close(freq[:4], expect, atol=0.025, rtol=0)
    torch.testing.assert_close(conf, expect[tok])


def test_auto_uses_reference_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = importlib.import_module("agentflow.kernels.constrained_select")

    def boom(*_args: object) -> None:
        raise AssertionError("the Triton path must not run for CPU tensors under auto")

    monkeypatch.setattr(mod, "_triton", boom)
    tok, _ = constrained_select(torch.tensor([[0.0, 2.0, 1.0]]))
    assert tok.tolist() == [1]


def test_forced_triton_without_gpu_or_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(KernelBackendError, match="TRITON_INTERPRET"):
        constrained_select(torch.zeros(1, 4), backend="triton")


def test_bad_inputs_are_named() -> None:
    logits = torch.zeros(2, 40)
    with pytest.raises(ValueError, match=r"\[N, ceil\(V/32\)\]"):
        constrained_select(logits, torch.zeros(2, 1, dtype=torch.int32))
    with pytest.raises(TypeError, match="int32 bitmask"):
        constrained_select(logits, torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(TypeError, match="fp32, fp16 or bf16"):
        constrained_select(logits.long())
    with pytest.raises(ValueError, match="temperature"):
        constrained_select(logits, None, -1.0)
    with pytest.raises(ValueError, match=r"\[N, V\]"):
        constrained_select(torch.zeros(40))
    with pytest.raises(ValueError, match="backend"):
        constrained_select(logits, backend="cuda")  # type: ignore[arg-type]


def test_gumbel_noise_is_finite_at_the_extremes() -> None:
    from agentflow.kernels.gumbel import gumbel_noise

    # Enough (row, col) pairs that some hashes land in the top and bottom 2**-18 of the range.
    noise = gumbel_noise(7, torch.arange(64).unsqueeze(1), torch.arange(1 << 14).unsqueeze(0))
    assert bool(torch.isfinite(noise).all())
    assert noise.max().item() > 12.0 and noise.min().item() < -2.5


@pytest.mark.parametrize("temperature", [0.0, 1.3])
def test_split_rows_match_reference(
    temperature: float, device: torch.device, triton_ok: None
) -> None:
    from agentflow.kernels._constrained_select_triton import launch
    from agentflow.kernels.gumbel import seed_mix

    logits, allowed = _inputs(3, 1000, 0.1, 21, device)
    logits[1, :] = float("-inf")  # a row with nothing finite: every split is empty
    logits[2, [130, 900]] = 50.0  # a tie across two splits: the lower id wins
    for mask in (allowed, None):
        ref = constrained_select(logits, mask, temperature, 8, backend="torch")
        tri = launch(logits, mask, temperature, seed_mix(8), block_v=64, splits=5)
        assert torch.equal(tri[0], ref[0])
        torch.testing.assert_close(tri[1], ref[1], rtol=1e-5, atol=1e-6)
