"""``agentflow step``: tools-file validation, the --json contract, models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agentflow.cli import main

ORDER_TOOL = {
    "name": "get_order",
    "description": "Look up an order.",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
}


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([ORDER_TOOL]))
    return path


def write(tmp_path: Path, content: Any) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_json_output_contract(tools_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "step",
            "--tools",
            str(tools_file),
            "--message",
            "Where is order 58213?",
            "--model",
            "test",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"action", "stats"}
    calls = out["action"]["tool_calls"]
    assert calls[0]["name"] == "get_order"
    jsonschema.validate(calls[0]["arguments"], ORDER_TOOL["parameters"])
    assert {"input_tokens", "output_tokens", "forward_passes", "seconds", "mode"} <= set(
        out["stats"]
    )


def test_text_output(tools_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["step", "--tools", str(tools_file), "--message", "hi", "--model", "test"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tool call: get_order(") and "stats: model=test" in out


def test_final_with_output_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tools = write(tmp_path, [])
    schema = tmp_path / "out.json"
    schema.write_text(
        json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    )
    code = main(
        [
            "step",
            "--tools",
            str(tools),
            "--message",
            "count",
            "--model",
            "test",
            "--output-schema",
            str(schema),
            "--json",
        ]
    )
    assert code == 0
    assert json.loads(capsys.readouterr().out)["action"] == {"final": {"n": 0}}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ({"name": "x"}, "must hold a JSON list"),
        (["x"], "tools[0] must be an object"),
        ([{"name": "has space", "parameters": {}}], "'name' must be a string"),
        (
            [{"name": "t", "parameters": {"type": "nope"}}],
            "tool 't' (tools[0]): 'parameters' is not a valid JSON Schema",
        ),
        ([{"name": "t"}], "'parameters' (a JSON Schema) is missing"),
        ([{"name": "t", "parameters": {}, "args": {}}], "unknown key(s) ['args']"),
        ([ORDER_TOOL, ORDER_TOOL], "duplicate tool name"),
    ],
)
def test_invalid_tools_files_exit_2_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: Any, message: str
) -> None:
    path = write(tmp_path, content)
    assert main(["step", "--tools", str(path), "--message", "hi", "--model", "test"]) == 2
    assert message in capsys.readouterr().err


def test_missing_tools_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["step", "--tools", str(tmp_path / "none.json"), "--message", "hi", "--model", "test"])
        == 2
    )
    assert "cannot read tools file" in capsys.readouterr().err


def test_openai_wrapped_tools_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, [{"type": "function", "function": ORDER_TOOL}])
    assert main(["step", "--tools", str(path), "--message", "hi", "--model", "test", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["action"]["tool_calls"][0]["name"] == "get_order"


def test_remote_model_errors_exit_1(tools_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Port 9 on localhost: nothing listens, the connection is refused at once.
    code = main(
        [
            "step",
            "--tools",
            str(tools_file),
            "--message",
            "hi",
            "--model",
            "openai:m",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ]
    )
    assert code == 1
    assert "ModelConnectionError" in capsys.readouterr().err
