"""``agentflow run FILE.py``: the main() and module-level agent conventions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.cli import main

AGENT_FILE = '''
from agentflow import Agent, tool
from agentflow.models import TestModel

@tool
def get_order(order_id: str) -> dict:
    """Look up an order."""
    return {"order_id": order_id, "status": "shipped"}

agent = Agent("support", instructions="Help.", tools=[get_order], model=TestModel())
'''


def script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "user_app.py"
    path.write_text(text)
    return path


def test_runs_module_level_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, AGENT_FILE)
    assert main(["run", str(path), "--message", "Where is 58213?"]) == 0
    out = capsys.readouterr().out
    assert "call get_order(" in out and '"status": "shipped"' in out
    assert "final:" in out and "usage: 2 steps, 1 tool calls" in out


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, AGENT_FILE)
    assert main(["run", str(path), "-m", "hi", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["completed"] is True and data["agent"] == "support"


def test_main_function_gets_the_message_and_sets_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = script(
        tmp_path,
        "import helper\nasync def main(message):\n    print(helper.shout(message))\n    return 3\n",
    )
    (tmp_path / "helper.py").write_text("def shout(s):\n    return s.upper()\n")
    assert main(["run", str(path), "-m", "hello"]) == 3
    assert capsys.readouterr().out.strip() == "HELLO"


def test_arguments_after_double_dash_become_sys_argv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = script(tmp_path, "import sys\ndef main(argv=None):\n    print(sys.argv[1:])\n")
    assert main(["run", str(path), "--", "--db", "x.db", "hello"]) == 0
    assert capsys.readouterr().out.strip() == "['--db', 'x.db', 'hello']"


@pytest.mark.parametrize(
    ("text", "argv", "message"),
    [
        ("x = 1\n", ["-m", "hi"], "neither a main() function nor a module-level `agent`"),
        (AGENT_FILE, [], "--message is required"),
        ("def broken(:\n", [], "syntax error"),
    ],
)
def test_bad_files_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, argv: list[str], message: str
) -> None:
    path = script(tmp_path, text)
    assert main(["run", str(path), *argv]) == 2
    assert message in capsys.readouterr().err


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "nope.py")]) == 2
    assert "no such file" in capsys.readouterr().err
