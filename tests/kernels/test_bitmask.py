"""The packed bitset layout shared by every kernel."""

from __future__ import annotations

import pytest
import torch

from agentflow.kernels import num_words, pack_bits, unpack_bits


@pytest.mark.parametrize("n", [1, 31, 32, 33, 100])
def test_round_trip_and_layout(n: int) -> None:
    bits = torch.rand(3, n, generator=torch.Generator().manual_seed(n)) < 0.5
    bits[0, n - 1] = True
    words = pack_bits(bits)
    assert words.dtype == torch.int32 and words.shape == (3, num_words(n))
    assert torch.equal(unpack_bits(words, n), bits)
    t = n - 1  # bit t % 32 of word t // 32
    assert (int(words[0, t // 32]) >> (t % 32)) & 1 == 1


def test_bit_31_is_the_sign_bit() -> None:
    bits = torch.zeros(1, 32, dtype=torch.bool)
    bits[0, 31] = True
    assert pack_bits(bits).item() == -(2**31)


def test_wrong_word_count() -> None:
    with pytest.raises(ValueError, match="need 2 words"):
        unpack_bits(torch.zeros(1, 3, dtype=torch.int32), 40)
