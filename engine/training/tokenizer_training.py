"""Train the embedded byte-level BPE tokenizer on the synthetic corpus.

Pre-tokenization isolates whitespace, single digits, letter runs and punctuation
runs, so a word or an id is split into the *same* tokens wherever it appears —
after a space in the user's message or after a quote in the action JSON. That
makes copying an argument a token-for-token copy, which a small model learns far
more easily. Byte-level mapping keeps every byte (and casing) round-tripping.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from ..chat_template import SPECIAL_TOKENS
from ..tokenizer import Tokenizer as EngineTokenizer
from .corpus import CorpusGenerator

#: Whitespace runs | letter runs | one digit | punctuation runs.
PRETOKENIZE_PATTERN = r"\s+|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+"


def build_untrained() -> Tokenizer:
    """An empty BPE tokenizer with the engine's pre-tokenizer and decoder."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def train_tokenizer(texts: Iterable[str], vocab_size: int = 2048) -> EngineTokenizer:
    """Train on ``texts``; special tokens take ids 0..7 in ``SPECIAL_TOKENS`` order."""
    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(
            f"vocab_size {vocab_size} cannot hold the 256 bytes and the special tokens"
        )
    tok = build_untrained()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    for i, special in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(special) != i:
            raise RuntimeError(
                f"special token {special} got id {tok.token_to_id(special)}, not {i}"
            )
    return EngineTokenizer(tok)


def corpus_texts(n_samples: int, seed: int) -> Iterable[str]:
    """Rendered training conversations (prompt + target) for tokenizer training."""
    for sample in CorpusGenerator("train", seed).samples(n_samples):
        yield sample.prompt() + sample.target


def train_and_save(
    path: Path, *, n_samples: int = 20000, vocab_size: int = 2048, seed: int = 0
) -> EngineTokenizer:
    """Train on ``n_samples`` training conversations and write ``tokenizer.json`` to ``path``."""
    tok = train_tokenizer(corpus_texts(n_samples, seed), vocab_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.hf.save(str(path))
    return EngineTokenizer.from_file(path)
