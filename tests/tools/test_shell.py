"""The sandboxed shell tool: allow-list, no shell, cwd jail, timeout, output cap, scrubbed env."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentflow.tool import Tool
from agentflow.tools import (
    CommandNotAllowedError,
    PathOutsideRootError,
    ToolConfigError,
    shell_tool,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha\nbeta\n")
    return work


@pytest.fixture
def shell(root: Path) -> Tool:
    return shell_tool(root, allow=["ls", "cat", "echo", "env", "sleep", "head", "pwd"], timeout=2.0)


def call(tool: Tool, command: str) -> Any:
    return anyio.run(tool.invoke, {"command": command})


def test_runs_allowed_commands_in_the_root(shell: Tool, root: Path) -> None:
    result = call(shell, "cat a.txt")
    assert result == {
        "exit_code": 0,
        "stdout": "alpha\nbeta\n",
        "stderr": "",
        "timed_out": False,
        "truncated": False,
    }
    assert call(shell, "pwd")["stdout"].strip() == str(root.resolve())
    failed = call(shell, "cat missing.txt")
    assert failed["exit_code"] != 0 and "missing.txt" in failed["stderr"]


def test_no_shell_interprets_the_line(shell: Tool, root: Path) -> None:
    result = call(shell, "echo hi; touch pwned && echo $HOME `id` | cat")
    assert result["stdout"] == "hi; touch pwned && echo $HOME `id` | cat\n"
    assert not (root / "pwned").exists()


@pytest.mark.parametrize("command", ["rm -rf .", "/bin/ls", "bash -c ls", "python3 -c 1"])
def test_commands_off_the_allow_list_are_refused(shell: Tool, command: str) -> None:
    with pytest.raises(CommandNotAllowedError, match="not allowed"):
        call(shell, command)


@pytest.mark.parametrize(
    "command", ["cat /etc/passwd", "ls ..", "cat ../x", "head --file=/etc/hosts", "ls ~"]
)
def test_paths_outside_the_root_are_refused(shell: Tool, command: str) -> None:
    with pytest.raises(PathOutsideRootError):
        call(shell, command)


def test_environment_is_scrubbed(shell: Tool, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    env = dict(line.split("=", 1) for line in call(shell, "env")["stdout"].splitlines())
    assert "SECRET_TOKEN" not in env
    assert env["HOME"] == str(root.resolve())
    assert set(env) <= {"PATH", "HOME", "LANG"}


def test_timeout_kills_the_process(shell: Tool) -> None:
    started = time.perf_counter()
    result = call(shell, "sleep 30")
    assert result["timed_out"] is True and result["exit_code"] is None
    assert time.perf_counter() - started < 5


def test_output_is_capped(root: Path) -> None:
    (root / "big.txt").write_text("y" * 10_000)
    tool = shell_tool(root, allow=["cat"], max_output=100)
    result = call(tool, "cat big.txt")
    assert result["truncated"] is True and len(result["stdout"]) == 100 and result["exit_code"] == 0


def test_unparseable_and_empty_lines(shell: Tool) -> None:
    with pytest.raises(ValueError, match="cannot parse"):
        call(shell, "echo 'unterminated")
    with pytest.raises(ValueError, match="empty command"):
        call(shell, "   ")


def test_configuration_is_checked(root: Path) -> None:
    with pytest.raises(ToolConfigError, match="non-empty allow-list"):
        shell_tool(root, allow=[])
    with pytest.raises(ToolConfigError, match="bare command names"):
        shell_tool(root, allow=["/bin/ls"])
    with pytest.raises(ToolConfigError, match="not on PATH"):
        shell_tool(root, allow=["definitely-not-a-command"])
    with pytest.raises(ToolConfigError, match="not a directory"):
        shell_tool(root / "nope", allow=["ls"])
    assert "ls" in shell_tool(root, allow=["ls"]).description
    assert os.path.isdir(root)
