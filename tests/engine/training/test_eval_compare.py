"""Paired comparison of two eval reports: fixed/broken counts and the McNemar p-value."""

from __future__ import annotations

from typing import Any

import pytest

from agentflow.engine.training.eval_compare import (
    PairedCount,
    compare_reports,
    format_comparison,
)


def _report(tool: list[bool], seed: int = 777, split: str | None = "heldout") -> dict[str, Any]:
    settings: dict[str, Any] = {"n": len(tool), "seed": seed}
    if split is not None:
        settings["split"] = split
    cases = [
        {
            "mode": "diffusion",
            "domain": "support",
            "kind": "call",
            "expects_calls": True,
            "tool_choice": t,
            "exact_args": False,
            "valid_json": True,
            "final_choice": False,
            "grounded_final": None,
            "faithful_final": None,
        }
        for t in tool
    ]
    return {"settings": settings, "cases": cases}


def test_counts_fixed_and_broken_cases_per_metric() -> None:
    old = _report([True, False, False, True, False])
    new = _report([True, True, True, False, False])
    got = compare_reports(old, new)["diffusion"]
    assert got["tool_choice"] == PairedCount(cases=5, fixed=2, broken=1)
    assert got["exact_args"] == PairedCount(cases=5, fixed=0, broken=0)
    assert got["final_choice"].cases == 0  # call cases do not score final answers
    assert "tool_choice" in format_comparison({"diffusion": got})
    assert "final_choice" not in format_comparison({"diffusion": got})


def test_exact_mcnemar_p_value() -> None:
    assert PairedCount(cases=499, fixed=47, broken=36).p_value == pytest.approx(0.273, abs=1e-3)
    assert PairedCount(cases=10, fixed=10, broken=0).p_value == pytest.approx(2 / 1024)
    assert PairedCount(cases=10, fixed=0, broken=0).p_value == 1.0


def test_reports_of_other_cases_are_refused() -> None:
    with pytest.raises(ValueError, match="seed is 777 there and 1 here"):
        compare_reports(_report([True]), _report([True], seed=1))
    with pytest.raises(ValueError, match="split"):
        compare_reports(_report([True]), _report([True], split="train"))
    # a report written before --split existed is a held-out one
    assert compare_reports(_report([True], split=None), _report([False]))
    longer = _report([True])
    longer["settings"]["min_prompt_tokens"] = 640
    with pytest.raises(ValueError, match="min_prompt_tokens is 0 there and 640 here"):
        compare_reports(_report([True]), longer)
    other = _report([True, False])
    other["cases"][1]["kind"] = "parallel"
    with pytest.raises(ValueError, match="diffusion cases differ"):
        compare_reports(_report([True, False]), other)
