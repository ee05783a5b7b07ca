"""``agentflow demo``: the customer-support example end to end (TestModel here; the
embedded-model run is ``make demo``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agentflow.cli import main
from agentflow.cli.demo import load_example


def test_demo_runs_the_example_against_its_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "shop.db"
    assert main(["demo", "--model", "test", "--db", str(db), "-m", "Where is my order 58213?"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("customer: Where is my order 58213?")
    assert "call get_order(" in out and "call track_shipment(" in out
    assert "final:" in out and "usage: 2 steps" in out
    with sqlite3.connect(db) as conn:  # the example created and seeded the shop
        assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] >= 1


def test_demo_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "test", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["agent"] == "customer_support" and data["completed"] is True


def test_example_is_found() -> None:
    module = load_example()
    assert callable(module.build_agent)


def test_missing_example_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import agentflow.cli.demo as demo

    monkeypatch.setattr(demo, "EXAMPLE", "no_such_example")
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--model", "test"]) == 2
    assert "cannot find examples/no_such_example.py" in capsys.readouterr().err


def test_base_url_needs_an_openai_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "--base-url applies to 'openai:MODEL'" in capsys.readouterr().err


def test_the_shipped_models_answer_the_demo_request(capsys: pytest.CaptureFixture[str]) -> None:
    # What `make demo` shows: the packaged pair (auto mode) looks the order up with the
    # customer's number, gets the row from SQLite and then gives a final answer.
    assert main(["demo", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    results = [r for step in run["steps"] for r in step["tool_results"]]
    assert results and results[0]["name"] == "get_order"
    assert results[0]["arguments"] == {"order_id": "58213"}
    assert results[0]["error"] is None and results[0]["result"]["status"] == "shipped"
    assert run["completed"] is True and run["output"]


def test_auto_mode_without_a_verifier_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow.engine.checkpoints import resolve_model_path

    folder = resolve_model_path("agentflow-tiny-dlm")  # as a folder: no packaged verifier
    assert main(["demo", "--model", str(folder), "--mode", "auto"]) == 2
    assert "needs an autoregressive verifier" in capsys.readouterr().err
