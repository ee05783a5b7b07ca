"""Tool similarity: which tools a request means, by word vectors, as tool-name bonuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from engine_testing import SUPPORT_TOOLS
from safetensors.numpy import save_file

from agentflow.engine.errors import CheckpointError
from agentflow.engine.tool_relevance import relevance
from agentflow.engine.tool_similarity import (
    WORDLLAMA_FILES,
    WordVectors,
    similarity,
    similarity_bonuses,
    wordllama_folder,
)

TOOLS = SUPPORT_TOOLS


def test_the_packaged_vectors_embed_texts_as_unit_vectors(vectors: WordVectors) -> None:
    assert vectors.table.shape == (32000, 256)
    rows = vectors.embed(["parcel", "where is my parcel", ""])
    assert rows.shape == (3, 256) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows[:2], axis=1), 1.0, atol=1e-5)
    assert not rows[2].any()  # no tokens: no direction


@pytest.mark.parametrize(
    ("request_text", "meant"),
    [
        ("my parcel hasn't arrived, where is it?", "locate_shipment"),
        ("I forgot my login, help", "recover_password"),
        ("I want to be reimbursed for ORD-5521", "refund_payment"),
        ("halt my purchase now", "stop_order"),
        ("I can't sign in", "recover_password"),
    ],
)
def test_the_tool_a_request_means_is_the_most_similar_without_a_shared_word(
    vectors: WordVectors, request_text: str, meant: str
) -> None:
    assert not any(relevance(request_text, TOOLS).values())  # no word in common
    scores = similarity(request_text, TOOLS, vectors)
    assert max(scores, key=scores.__getitem__) == meant
    assert sum(scores.values()) == pytest.approx(0.0, abs=1e-5)  # relative to the tools' mean


def test_bonuses_scale_similarity_and_stay_off_where_there_is_nothing_to_weigh(
    vectors: WordVectors,
) -> None:
    request = "my parcel hasn't arrived, where is it?"
    scores = similarity(request, TOOLS, vectors)
    bonuses = similarity_bonuses(request, TOOLS, vectors, weight=20.0)
    assert bonuses == pytest.approx({name: 20.0 * s for name, s in scores.items()})
    assert similarity_bonuses(request, TOOLS, vectors, weight=0.0) == {}
    assert similarity_bonuses(request, TOOLS[:1], vectors) == {}  # one tool: no choice
    assert similarity_bonuses('ORD-123 a@b.io "x"', TOOLS, vectors) == {}  # values only
    with pytest.raises(ValueError, match="tool similarity weight"):
        similarity_bonuses(request, TOOLS, vectors, weight=-1.0)


def test_missing_or_unreadable_vector_files_are_named(tmp_path: Path) -> None:
    folder = wordllama_folder()
    weights, tokenizer = (folder / f for f in WORDLLAMA_FILES)
    with pytest.raises(CheckpointError, match="not found") as missing:
        WordVectors.load(tmp_path / "absent.safetensors", tokenizer)
    assert missing.value.path == tmp_path / "absent.safetensors"
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match=r"corrupt\.safetensors"):
        WordVectors.load(corrupt, tokenizer)
    two = tmp_path / "two.safetensors"
    save_file({"a": np.zeros((4, 2), np.float32), "b": np.zeros((4, 2), np.float32)}, str(two))
    with pytest.raises(CheckpointError, match="one \\[vocab, dim\\] table, found 2"):
        WordVectors.load(two, tokenizer)
    bad_tokenizer = tmp_path / "tokenizer.json"
    bad_tokenizer.write_text("{}")
    with pytest.raises(CheckpointError, match=r"tokenizer\.json"):
        WordVectors.load(weights, bad_tokenizer)


def test_without_the_wordllama_package_the_error_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(CheckpointError, match="pip install wordllama"):
        WordVectors.load()
