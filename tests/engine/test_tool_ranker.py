"""The tool ranker: the packaged weights, what it reads of a request, saving and loading, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from engine_testing import SUPPORT_TOOLS

from agentflow.engine.chat_template import ToolSpec
from agentflow.engine.errors import CheckpointError
from agentflow.engine.tool_priors import step_bonuses
from agentflow.engine.tool_ranker import CONFIG_FILE, WEIGHTS_FILE, ToolRanker, request_text
from agentflow.engine.tool_similarity import WordVectors

TOOLS = SUPPORT_TOOLS


@pytest.fixture(scope="module")
def ranker(vectors: WordVectors) -> ToolRanker:
    return ToolRanker.load(vectors=vectors)


def test_a_request_is_read_lower_cased_with_value_shapes_not_values() -> None:
    assert request_text('Ticket "Printer on floor 3 offline" for INV-2024-8314') == (
        'ticket  "title"  for inv-0000-0000'
    )


@pytest.mark.parametrize(
    ("request_text_", "meant"),
    [
        ("hey, where is my parcel for 58213?", "locate_shipment"),
        ("please halt ORD-5521 before it ships", "stop_order"),
        ("I can't sign in, my email is dana@example.com", "recover_password"),
        ("I want my money back for order 7781", "refund_payment"),
    ],
)
def test_the_packaged_ranker_puts_the_meant_tool_first(
    ranker: ToolRanker, request_text_: str, meant: str
) -> None:
    scores = ranker.scores(request_text_, TOOLS)
    assert max(scores, key=scores.__getitem__) == meant
    assert sum(scores.values()) == pytest.approx(0.0, abs=1e-4)  # relative to the tools' mean


def test_a_tools_name_and_description_are_what_it_reads_not_its_place(ranker: ToolRanker) -> None:
    request = "do we know mia.jensen@initech.io?"
    tools = [
        ToolSpec("modify_email", "Replace the account email"),
        ToolSpec("customer_by_email_get", "Search customers by email"),
        ToolSpec("schedule_note", "Schedule a reminder"),
    ]
    forward = ranker.scores(request, tools)
    backward = ranker.scores(request, tools[::-1])
    assert max(forward, key=forward.__getitem__) == "customer_by_email_get"
    assert forward == pytest.approx(backward, abs=1e-5)


def test_bonuses_scale_the_scores_and_stay_off_where_there_is_no_choice(ranker: ToolRanker) -> None:
    request = "where is my parcel?"
    scores = ranker.scores(request, TOOLS)
    assert ranker.bonuses(request, TOOLS, 2.0) == pytest.approx(
        {n: 2 * s for n, s in scores.items()}
    )
    assert ranker.bonuses(request, TOOLS, 0.0) == {}
    assert ranker.bonuses(request, TOOLS[:1]) == {}
    assert ranker.scores("", TOOLS) == dict.fromkeys((t.name for t in TOOLS), 0.0)
    with pytest.raises(ValueError, match="tool ranker weight"):
        ranker.bonuses(request, TOOLS, -1.0)


def test_a_step_adds_the_rankers_bonuses_to_the_others(
    ranker: ToolRanker, vectors: WordVectors
) -> None:
    request = "where is my order? tracking please"
    weights = {"relevance_weight": 7.0, "similarity_weight": 20.0, "answer_bonus": 0.0}
    without = step_bonuses(request, TOOLS, vectors=vectors, **weights).tools
    with_ranker = step_bonuses(
        request, TOOLS, vectors=vectors, ranker=ranker, ranker_weight=1.5, **weights
    ).tools
    ranked = ranker.bonuses(request, TOOLS, 1.5)
    assert with_ranker == pytest.approx({n: without[n] + ranked[n] for n in without})
    with pytest.raises(ValueError, match="needs a tool ranker"):
        step_bonuses(request, TOOLS, vectors=vectors, ranker_weight=1.0, **weights)


def test_saved_and_loaded_it_scores_the_same(
    ranker: ToolRanker, vectors: WordVectors, tmp_path: Path
) -> None:
    ranker.save(tmp_path, training={"note": "copy"})
    again = ToolRanker.load(tmp_path, vectors=vectors)
    request = "please halt ORD-5521 before it ships"
    assert again.scores(request, TOOLS) == pytest.approx(ranker.scores(request, TOOLS), abs=1e-3)
    assert json.loads((tmp_path / CONFIG_FILE).read_text())["training"] == {"note": "copy"}


def test_missing_or_broken_files_are_named(
    ranker: ToolRanker, vectors: WordVectors, tmp_path: Path
) -> None:
    with pytest.raises(CheckpointError, match="config not found"):
        ToolRanker.load(tmp_path, vectors=vectors)
    ranker.save(tmp_path)
    (tmp_path / WEIGHTS_FILE).write_bytes(b"not safetensors")
    with pytest.raises(CheckpointError, match=r"ranker\.safetensors"):
        ToolRanker.load(tmp_path, vectors=vectors)
    (tmp_path / WEIGHTS_FILE).unlink()
    with pytest.raises(CheckpointError, match="weights not found"):
        ToolRanker.load(tmp_path, vectors=vectors)
    ranker.save(tmp_path)
    config = json.loads((tmp_path / CONFIG_FILE).read_text())
    (tmp_path / CONFIG_FILE).write_text(json.dumps({**config, "format": "other/9"}))
    with pytest.raises(CheckpointError, match="format 'other/9'"):
        ToolRanker.load(tmp_path, vectors=vectors)
    (tmp_path / CONFIG_FILE).write_text(json.dumps({**config, "vectors_shape": [10, 4]}))
    with pytest.raises(CheckpointError, match="word vectors of shape"):
        ToolRanker.load(tmp_path, vectors=vectors)


def test_weights_of_the_wrong_shape_are_refused(ranker: ToolRanker) -> None:
    with pytest.raises(ValueError, match="projection"):
        ToolRanker(
            ranker.vectors,
            np.eye(3, dtype=np.float32),
            ranker.request_weights,
            ranker.tool_weights,
            ranker.scale,
        )
    with pytest.raises(ValueError, match="tool_weights"):
        ToolRanker(
            ranker.vectors,
            ranker.projection,
            ranker.request_weights,
            ranker.tool_weights[:5],
            ranker.scale,
        )
