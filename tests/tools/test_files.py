"""File tools: read/write/list inside a root; path traversal refused."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pydantic
import pytest

from agentflow.tool import Tool
from agentflow.tools import PathOutsideRootError, ToolConfigError, file_tools


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "app.log").write_text("line 1\nline 2\n")
    (work / "notes.txt").write_text("héllo")
    (tmp_path / "secret.txt").write_text("top secret")
    return work


@pytest.fixture
def tools(root: Path) -> dict[str, Tool]:
    return {t.name: t for t in file_tools(root)}


def call(tool: Tool, **arguments: Any) -> Any:
    return anyio.run(tool.invoke, arguments)


def test_read_write_list_round_trip(tools: dict[str, Tool], root: Path) -> None:
    assert call(tools["read_file"], path="notes.txt") == {
        "path": "notes.txt",
        "content": "héllo",
        "truncated": False,
    }
    written = call(tools["write_file"], path="out/report.md", content="# Report\n")
    assert written["path"] == "out/report.md" and written["bytes_written"] == 9
    call(tools["write_file"], path="out/report.md", content="more\n", append=True)
    assert (root / "out" / "report.md").read_text() == "# Report\nmore\n"
    listing = call(tools["list_files"], path=".", recursive=True)
    paths = [e["path"] for e in listing["entries"]]
    assert paths == sorted(paths)
    assert {"logs", "logs/app.log", "notes.txt", "out", "out/report.md"} <= set(paths)
    assert next(e for e in listing["entries"] if e["path"] == "logs/app.log")["size"] == 14


@pytest.mark.parametrize(
    "path", ["../secret.txt", "/etc/passwd", "logs/../../secret.txt", "a\x00b"]
)
def test_paths_outside_the_root_are_refused(tools: dict[str, Tool], path: str) -> None:
    for name, extra in (("read_file", {}), ("write_file", {"content": "x"}), ("list_files", {})):
        with pytest.raises(PathOutsideRootError):
            call(tools[name], path=path, **extra)


def test_symlink_pointing_outside_is_refused_and_hidden(tools: dict[str, Tool], root: Path) -> None:
    os.symlink(root.parent / "secret.txt", root / "link.txt")
    with pytest.raises(PathOutsideRootError):
        call(tools["read_file"], path="link.txt")
    names = [e["path"] for e in call(tools["list_files"])["entries"]]
    assert "link.txt" not in names


def test_read_is_capped_and_binary_refused(root: Path) -> None:
    tools = {t.name: t for t in file_tools(root, max_bytes=4)}
    result = call(tools["read_file"], path="logs/app.log")
    assert result == {"path": "logs/app.log", "content": "line", "truncated": True}
    (root / "blob.bin").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(ValueError, match="not UTF-8"):
        call(tools["read_file"], path="blob.bin")
    with pytest.raises(ValueError, match="exceeds the 4-byte limit"):
        call(tools["write_file"], path="x.txt", content="too long")


def test_read_only_has_no_write_tool(root: Path) -> None:
    assert sorted(t.name for t in file_tools(root, writable=False)) == ["list_files", "read_file"]


def test_missing_files_and_bad_arguments(tools: dict[str, Tool], root: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no file at 'nope\.txt'"):
        call(tools["read_file"], path="nope.txt")
    with pytest.raises(IsADirectoryError):
        call(tools["write_file"], path="logs", content="x")
    with pytest.raises(pydantic.ValidationError):
        call(tools["read_file"], path=3, extra=True)


def test_root_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ToolConfigError, match="not a directory"):
        file_tools(tmp_path / "missing")
