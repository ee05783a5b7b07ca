"""Shared fixtures: a small tokenizer trained on the corpus (module-cached on disk)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentflow.engine.tokenizer import Tokenizer
from agentflow.engine.training.tokenizer_training import train_and_save


@pytest.fixture(scope="session")
def small_tokenizer_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    train_and_save(path, n_samples=300, vocab_size=512, seed=0)
    return path


@pytest.fixture(scope="session")
def small_tokenizer(small_tokenizer_path: Path) -> Tokenizer:
    return Tokenizer.from_file(small_tokenizer_path)
