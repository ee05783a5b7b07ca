"""``agentflow train-ranker``: a ranker trained and saved where asked, bad options refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.cli import main
from agentflow.engine.chat_template import ToolSpec
from agentflow.engine.tool_ranker import CONFIG_FILE, ToolRanker
from agentflow.engine.tool_similarity import WordVectors

TOOLS = [ToolSpec("track", "Carrier tracking"), ToolSpec("refund", "Send money back")]


def test_it_trains_and_saves_a_ranker_that_loads(tmp_path: Path, vectors: WordVectors) -> None:
    out = tmp_path / "ranker"
    assert main(["train-ranker", "--out", str(out), "--samples", "400", "--threads", "1"]) == 0
    training = json.loads((out / CONFIG_FILE).read_text())["training"]
    assert training["samples"] == 400 and training["examples"] > 100
    ranker = ToolRanker.load(out, vectors=vectors)
    assert set(ranker.scores("where is my parcel?", TOOLS)) == {"track", "refund"}


def test_options_out_of_range_exit_2_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train-ranker", "--out", str(tmp_path), "--samples", "0"]) == 2
    assert "samples must be at least 1" in capsys.readouterr().err
    assert not (tmp_path / CONFIG_FILE).exists()
