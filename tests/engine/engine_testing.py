"""Helpers of the engine tests: tiny random models and a fake DecodeConstraint.

Imported by name (``from engine_testing import ...``); the name is unique so it
cannot collide with another folder's ``conftest``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from agentflow.engine.chat_template import ToolSpec
from agentflow.engine.model import AttentionMode, ModelConfig, Transformer
from agentflow.engine.tokenizer import Tokenizer

#: Four support tools, as an agent lists them (tool relevance, similarity and priors).
SUPPORT_TOOLS = [
    ToolSpec("locate_shipment", "Carrier tracking for an order"),
    ToolSpec("stop_order", "Stop an order before shipping"),
    ToolSpec("recover_password", "Start a password reset for an email"),
    ToolSpec("refund_payment", "Send money back to the customer"),
]


class FixedAnswer:
    """Allows exactly ``target`` then the end token (then only end tokens).

    ``jump`` makes ``jump_forward`` / ``forced_tokens`` fill the answer without
    the model; without it the sampler must propose and commit every token.
    """

    def __init__(self, target: Sequence[int], end_id: int, vocab: int, *, jump: bool) -> None:
        self.answer = [*target, end_id]
        self.end_id = end_id
        self.vocab = vocab
        self.jump = jump
        self.offset = 0  # answer tokens before the current block / after the AR prefix
        self.calls: list[str] = []

    def _want(self, i: int) -> int:
        return self.answer[i] if i < len(self.answer) else self.end_id

    @property
    def done(self) -> bool:
        return self.offset >= len(self.answer)

    def jump_forward(self, tokens: Tensor, masked: Tensor) -> int:
        self.calls.append("jump_forward")
        if not self.jump or not bool(masked.any()):
            return 0
        filled = 0
        for i in range(int(masked.nonzero()[0]), tokens.shape[0]):
            if not masked[i]:
                break
            tokens[i] = self._want(self.offset + i)
            masked[i] = False
            filled += 1
        return filled

    def propose(
        self,
        tokens: Tensor,
        masked: Tensor,
        logits: Tensor,
        *,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> tuple[Tensor, Tensor]:
        self.calls.append("propose")
        want = torch.tensor([self._want(self.offset + i) for i in range(tokens.shape[0])])
        conf = torch.softmax(logits.float(), -1).gather(1, want.unsqueeze(1)).squeeze(1)
        return want, conf

    def commit(
        self,
        tokens: Tensor,
        masked: Tensor,
        order: Sequence[int],
        proposal: Tensor,
        logits: Tensor,
        *,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> list[int]:
        self.calls.append("commit")
        for i in order:
            tokens[i] = proposal[i]
            masked[i] = False
        return list(order)

    def finish_block(self, tokens: Tensor) -> None:
        self.calls.append("finish_block")
        assert tokens.tolist() == [self._want(self.offset + i) for i in range(tokens.shape[0])]
        self.offset += tokens.shape[0]

    def next_token_mask(self) -> Tensor:
        words = torch.zeros((self.vocab + 31) // 32, dtype=torch.int64)
        t = self._want(self.offset)
        words[t // 32] = 1 << (t % 32)
        return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)

    def forced_tokens(self) -> list[int]:
        return self.answer[self.offset :] if self.jump else []

    def refused_pick(self, token: int, logits: Tensor) -> int | None:
        return None

    def advance(self, token_ids: Sequence[int]) -> None:
        for t in token_ids:
            assert t == self._want(self.offset), (t, self.offset)
            self.offset += 1

    def checkpoint(self) -> Any:
        return self.offset

    def rollback(self, snapshot: Any) -> None:
        self.offset = snapshot


def make_config(attention: AttentionMode = "block", **overrides: object) -> ModelConfig:
    """A tiny config with the embedded special ids (pad 0, mask 1, end 2)."""
    base: dict[str, object] = dict(
        vocab_size=96,
        dim=32,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        ffn_dim=64,
        max_seq_len=256,
        attention=attention,
        block_length=4,
        mask_token_id=1,
        end_token_id=2,
        pad_token_id=0,
        tie_embeddings=False,
    )
    base.update(overrides)
    return ModelConfig(**base)  # type: ignore[arg-type]


def make_model(config: ModelConfig, seed: int = 0, peak: float = 40.0) -> Transformer:
    """Random weights; ``peak`` scales the output head so predictions are confident and tie-free."""
    torch.manual_seed(seed)
    model = Transformer(config)
    model.init_weights(seed)
    with torch.no_grad():
        head = model.tok_embeddings if model.output is None else model.output
        head.weight.mul_(peak)
    return model.eval()


def split_word(tokenizer: Tokenizer, *, one_byte_right: bool = False) -> tuple[int, int, int]:
    """(whole, left, right): a lower-case letter-run token the tokenizer writes for its
    own bytes, which are left's bytes then right's (with ``one_byte_right``: right is
    one byte that no token joins to a following quote)."""
    by_bytes = {
        tokenizer.token_bytes(i): i
        for i in range(tokenizer.vocab_size)
        if i not in tokenizer.special_ids
    }
    for piece, whole in sorted(by_bytes.items()):
        if len(piece) < 3 or not (piece.isalpha() and piece.islower()):
            continue
        if tokenizer.encode(piece.decode()) != [whole]:
            continue
        for cut in range(1, len(piece)):
            left, right = by_bytes.get(piece[:cut]), by_bytes.get(piece[cut:])
            if left is None or right is None:
                continue
            if one_byte_right and (cut != len(piece) - 1 or piece[cut:] + b'"' in by_bytes):
                continue
            return whole, left, right
    raise AssertionError("the tokenizer has no splittable word token")
