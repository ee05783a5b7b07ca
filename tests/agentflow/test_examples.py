"""The runnable examples: their tools really read and change data; their mains run end to end."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from pathlib import Path
from types import ModuleType

import pytest
from runtime_helpers import observations

from agentflow import Action, FunctionModel
from agentflow.models.base import StepRequest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def support() -> ModuleType:
    return load("customer_support")


@pytest.mark.anyio
async def test_support_tools_change_the_database(support: ModuleType, tmp_path: Path) -> None:
    db = tmp_path / "shop.db"

    def decide(request: StepRequest) -> Action:
        obs = observations(request)
        if not obs:
            return Action.call(
                # as the customer wrote it: the tool reads the number
                ("refund_order", {"order_id": "#58213", "amount": 20, "reason": "late"}),
                ("update_email", {"customer_id": "C100", "email": "ada@new.example"}),
            )
        if "get_order" not in obs:
            return Action.call(
                ("get_order", {"order_id": "58213"}),
                ("refund_order", {"order_id": "58213", "amount": 500, "reason": "other"}),
                ("track_shipment", {"order_id": "58214"}),
            )
        return Action.final_output(f"refunded {obs['get_order']['refunded']}")

    agent = support.build_agent(db, model=FunctionModel(decide))
    result = await agent.run("Refund 20 on order 58213 and change my email")
    assert result.output == "refunded 20.0"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT order_id, amount, reason FROM refunds").fetchall() == [
            ("58213", 20.0, "late")
        ]
        assert conn.execute("SELECT email FROM customers WHERE id='C100'").fetchone() == (
            "ada@new.example",
        )
    second = {o.name: o for o in result.steps[1].tool_results}
    assert (
        second["refund_order"].error == "ShopError: order 58213 has only 109.90 EUR left to refund"
    )
    assert second["track_shipment"].result == {
        "order_id": "58214",
        "status": "not shipped yet (order is processing)",
    }
    assert second["get_order"].result["email"] == "ada@new.example"


def test_support_main_with_test_model(
    support: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert support.main(["--model", "test", "Where is my order 58213?"]) == 0
    out = capsys.readouterr().out
    assert "customer: Where is my order 58213?" in out
    assert "get_order({'order_id': 'a'}) -> ShopError: order a does not exist" in out
    assert "answer: " in out and "usage: 2 steps" in out


def test_it_ops_main_reports_real_machine_state(capsys: pytest.CaptureFixture[str]) -> None:
    it_ops = load("it_ops")
    assert it_ops.main(["--model", "test"]) == 0
    out = capsys.readouterr().out
    assert "disk_usage({}) -> {'path': '/'" in out and "memory({}) -> {'total_gb'" in out
    report = json.loads(out[out.index("{\n") :])
    assert report["status"] in ("ok", "warning", "critical")


def test_it_ops_tail_log_stays_inside_its_folder(tmp_path: Path) -> None:
    it_ops = load("it_ops")
    (tmp_path / "app.log").write_text("".join(f"line {i}\n" for i in range(50)))
    tail = it_ops.log_tool(tmp_path)
    assert tail("app.log", 3) == ["line 47", "line 48", "line 49"]
    with pytest.raises(PermissionError, match="outside the log folder"):
        tail("../etc/passwd", 3)
    with pytest.raises(ValueError, match="between 1 and 200"):
        tail("app.log", 0)


@pytest.mark.parametrize("pattern", ["handoff", "agent_tool", "sequence", "fan_out", "router"])
def test_multi_agent_patterns_run(pattern: str, capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = load("multi_agent_pipeline")
    assert pipeline.main(["--model", "test", "--pattern", pattern, "Refund order 58213"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"[{pattern}] (")
