"""``agentflow eval`` on the packaged drafter: a tiny run end to end, both splits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.cli import main


@pytest.mark.parametrize(
    ("split", "cache_prefix", "choices", "min_tokens", "structured"),
    [("heldout", False, True, 0, True), ("train", True, False, 520, False)],
)
def test_eval_writes_a_report_for_the_split(
    split: str,
    cache_prefix: bool,
    choices: bool,
    min_tokens: int,
    structured: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "report.json"
    argv = ["eval", "--modes", "diffusion", "-n", "2", "--batch-size", "2"]
    if cache_prefix:
        argv.append("--cache-block-prefix")
    if choices:
        argv += ["--score-choices", "--text-threshold", "0.99", "--canonical", "--copy"]
        argv += ["--copy-within-text", "--tool-relevance", "4", "--tool-similarity", "20"]
        argv += ["--argument-fit", "16", "--second-choice", "3", "--tool-ranker", "1.5"]
    if min_tokens:
        argv += ["--min-prompt-tokens", str(min_tokens)]
    if structured:
        argv.append("--structured")
    assert main([*argv, "--split", split, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["settings"]["split"] == split
    assert report["settings"]["min_prompt_tokens"] == min_tokens
    assert report["settings"]["canonical"] is choices
    assert report["settings"]["copy"] is choices
    assert report["settings"]["copy_within_text"] is choices
    assert report["settings"]["tool_relevance"] == (4.0 if choices else 0.0)
    assert report["settings"]["tool_similarity"] == (20.0 if choices else 0.0)
    assert report["settings"]["argument_fit"] == (16.0 if choices else 0.0)
    assert report["settings"]["tool_ranker"] == (1.5 if choices else 0.0)
    assert report["settings"]["generation"]["cache_block_prefix"] is cache_prefix
    assert report["settings"]["generation"]["score_choices"] is choices
    assert report["settings"]["generation"]["text_threshold"] == (0.99 if choices else None)
    assert report["settings"]["generation"]["second_choice"] == (3.0 if choices else None)
    assert len(report["cases"]) == 2
    assert report["settings"]["structured"] is structured
    if structured:  # answers that are JSON objects, scored field by field
        assert all(case["kind"] == "structured" for case in report["cases"])
        assert all(case["structured_values"] is not None for case in report["cases"])
    assert all(case["valid_json"] for case in report["cases"])  # the action constraint
    assert "tool_choice" in capsys.readouterr().out


def test_eval_rejects_a_knob_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--modes", "ar", "-n", "1", "--text-threshold", "2"]) == 2
    assert "text_threshold must be in [0, 1]" in capsys.readouterr().err
    assert main(["eval", "--modes", "ar", "-n", "1", "--second-choice", "-1"]) == 2
    assert "second_choice must be >= 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag", ["--tool-relevance", "--tool-similarity", "--tool-ranker", "--argument-fit"]
)
def test_eval_rejects_a_negative_tool_weight(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--modes", "ar", "-n", "1", flag, "-1"]) == 2
    assert f"{flag} must be a finite number >= 0" in capsys.readouterr().err


def test_eval_rejects_an_unknown_split(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["eval", "--split", "test"])
    assert "invalid choice" in capsys.readouterr().err


def test_eval_compares_with_an_earlier_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = tmp_path / "first.json"
    argv = ["eval", "--modes", "diffusion", "-n", "2", "--batch-size", "2"]
    assert main([*argv, "--json", str(first)]) == 0
    capsys.readouterr()
    assert main([*argv, "--compare", str(first)]) == 0
    out = capsys.readouterr().out
    assert "paired against" in out and "tool_choice" in out
    # identical runs: nothing fixed, nothing broken
    row = next(line for line in out.splitlines() if line.startswith("diffusion  valid_json"))
    assert row.split()[2:5] == ["2", "0", "0"]


def test_eval_refuses_a_report_of_other_cases_before_decoding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"settings": {"n": 2, "seed": 5, "split": "heldout"}}))
    argv = ["eval", "--modes", "diffusion", "-n", "2", "--compare", str(other)]
    assert main(argv) == 2
    assert "seed is 5 there and 1234 here" in capsys.readouterr().err
    assert main([*argv[:-1], str(tmp_path / "missing.json")]) == 2
    assert "cannot compare with" in capsys.readouterr().err
