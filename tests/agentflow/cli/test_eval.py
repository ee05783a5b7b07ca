"""``agentflow eval`` on the packaged drafter: a tiny run end to end, both splits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.cli import main


@pytest.mark.parametrize("split", ["heldout", "train"])
def test_eval_writes_a_report_for_the_split(
    split: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    argv = ["eval", "--modes", "diffusion", "-n", "2", "--batch-size", "2"]
    assert main([*argv, "--split", split, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["settings"]["split"] == split
    assert len(report["cases"]) == 2
    assert all(case["valid_json"] for case in report["cases"])  # the action constraint
    assert "tool_choice" in capsys.readouterr().out


def test_eval_rejects_an_unknown_split(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["eval", "--split", "test"])
    assert "invalid choice" in capsys.readouterr().err
