"""Training the tool ranker: its examples, its start, what training buys, the options."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentflow.engine.tool_ranker import request_text
from agentflow.engine.tool_similarity import WordVectors, tool_text
from agentflow.engine.training.evaluate import eval_cases
from agentflow.engine.training.tool_ranker_training import (
    RankerNet,
    RankerTraining,
    _batch,
    _encode,
    ranked_requests,
    top_choice_rate,
    train_ranker,
)


@pytest.fixture(scope="module")
def trained(vectors: WordVectors) -> tuple:
    return train_ranker(RankerTraining(samples=3000, batch_size=32, learning_rate=3e-3), vectors)


def test_examples_are_the_requests_answered_by_calls() -> None:
    samples = eval_cases(200, 3, split="train")
    examples = ranked_requests(samples)
    with_calls = [s for s in samples if s.kind in ("call", "parallel") and s.calls]
    assert len(examples) == len(with_calls) > 0
    for ex, sample in zip(examples, with_calls, strict=True):
        assert ex.request == sample.messages[-1].content
        assert ex.wanted == {name for name, _ in sample.calls}
        assert ex.wanted <= {t.name for t in ex.tools}


def test_an_untrained_ranker_is_the_cosine_of_the_mean_vectors(vectors: WordVectors) -> None:
    ranker = RankerNet(torch.from_numpy(vectors.table.astype(np.float32))).export(vectors)
    request = "Where is my parcel for order 58213?"
    tools = eval_cases(5, 1)[0].tools
    rows = vectors.embed([request_text(request), *(tool_text(t) for t in tools)])
    cosines = [10.0 * float(x) for x in rows[1:] @ rows[0]]
    mean = sum(cosines) / len(cosines)
    expected = {t.name: c - mean for t, c in zip(tools, cosines, strict=True)}
    assert ranker.scores(request, tools) == pytest.approx(expected, abs=1e-4)


def test_the_torch_net_and_the_exported_ranker_score_alike(
    trained: tuple, vectors: WordVectors
) -> None:
    ranker, _ = trained
    net = RankerNet(torch.from_numpy(vectors.table.astype(np.float32)))
    with torch.no_grad():
        net.projection.copy_(torch.from_numpy(ranker.projection))
        net.request_weights.copy_(torch.from_numpy(ranker.request_weights))
        net.tool_weights.copy_(torch.from_numpy(ranker.tool_weights))
        net.scale.fill_(ranker.scale)
        examples = ranked_requests(eval_cases(60, 8))[:6]
        requests, request_mask, tools, tool_mask, listed, _ = _batch(
            [_encode(ex, vectors) for ex in examples]
        )
        scores = net(requests, request_mask, tools, tool_mask)
    for row, ex, present in zip(scores, examples, listed, strict=True):
        raw = row[present].tolist()
        mean = sum(raw) / len(raw)
        expected = {t.name: x - mean for t, x in zip(ex.tools, raw, strict=True)}
        assert ranker.scores(ex.request, ex.tools) == pytest.approx(expected, abs=1e-3)


def test_training_ranks_the_wanted_tools_first_more_often(
    trained: tuple, vectors: WordVectors
) -> None:
    ranker, made = trained
    untrained = RankerNet(torch.from_numpy(vectors.table.astype(np.float32))).export(vectors)
    fresh = ranked_requests(eval_cases(400, 21, split="train"))
    before = top_choice_rate(untrained.scores, fresh)
    after = top_choice_rate(ranker.scores, fresh)
    assert after > before + 0.1
    assert made["examples"] > 1000 and made["samples"] == 3000
    assert np.isfinite(made["last_loss"])


def test_the_same_options_train_the_same_ranker(trained: tuple, vectors: WordVectors) -> None:
    ranker, _ = trained
    again, _ = train_ranker(
        RankerTraining(samples=3000, batch_size=32, learning_rate=3e-3), vectors
    )
    # The same up to the order of threaded float sums, which Adam can magnify on a
    # token's near-zero gradient: compare what the two rank, not their bits.
    assert not np.allclose(ranker.projection, np.eye(ranker.vectors.dim), atol=1e-3)
    for ex in ranked_requests(eval_cases(80, 9))[:20]:
        first, second = ranker.scores(ex.request, ex.tools), again.scores(ex.request, ex.tools)
        assert second == pytest.approx(first, abs=0.05)
        assert max(second, key=second.__getitem__) == max(first, key=first.__getitem__)


@pytest.mark.parametrize(
    ("field", "value"), [("samples", 0), ("epochs", 0), ("batch_size", 0), ("learning_rate", 0.0)]
)
def test_options_out_of_range_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        RankerTraining(**{field: value})


def test_a_rate_needs_examples() -> None:
    with pytest.raises(ValueError, match="no examples"):
        top_choice_rate(lambda r, t: {}, [])
