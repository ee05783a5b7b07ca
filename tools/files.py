"""File tools: read, write and list files inside one root directory.

Every path the model gives is resolved (symlinks included) against the root; a
path that ends up outside it — ``..``, an absolute path, a symlink pointing out —
raises :class:`~agentflow.tools.errors.PathOutsideRootError`. Reads are capped
at ``max_bytes`` and must be UTF-8 text.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentflow.tool import Tool, tool

from .errors import PathOutsideRootError, ToolConfigError


def resolve_inside(root: Path, path: str) -> Path:
    """``path`` resolved against ``root``; refuses anything that lands outside ``root``."""
    if "\x00" in path:
        raise PathOutsideRootError(f"path {path!r} contains a NUL byte")
    candidate = (root / path).resolve()
    if candidate != root and not candidate.is_relative_to(root):
        raise PathOutsideRootError(f"path {path!r} is outside the allowed directory")
    return candidate


@dataclass
class FileTools:
    """Read/write/list within ``root``; ``tools()`` gives the :class:`Tool` objects."""

    root: Path
    writable: bool = True
    max_bytes: int = 256_000
    max_entries: int = 500
    prefix: str = ""

    def __post_init__(self) -> None:
        root = Path(self.root).expanduser()
        if not root.is_dir():
            raise ToolConfigError(f"file tools root {str(root)!r} is not a directory")
        self.root = root.resolve()
        if self.max_bytes <= 0 or self.max_entries <= 0:
            raise ToolConfigError("max_bytes and max_entries must be positive")

    def _relative(self, path: Path) -> str:
        rel = path.relative_to(self.root).as_posix()
        return rel or "."

    def read_file(self, path: str) -> dict[str, Any]:
        """Read a UTF-8 text file.

        Args:
            path: File path relative to the working directory.
        """
        target = resolve_inside(self.root, path)
        if not target.is_file():
            raise FileNotFoundError(f"no file at {path!r}")
        with target.open("rb") as fh:
            data = fh.read(self.max_bytes + 1)
        truncated = len(data) > self.max_bytes
        data = data[: self.max_bytes]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if not truncated or exc.start < len(data) - 3:
                raise ValueError(f"{path!r} is not UTF-8 text") from exc
            text = data[: exc.start].decode("utf-8")  # cut inside a multi-byte character
        return {"path": self._relative(target), "content": text, "truncated": truncated}

    def write_file(self, path: str, content: str, append: bool = False) -> dict[str, Any]:
        """Write (or append) UTF-8 text to a file, creating parent folders.

        Args:
            path: File path relative to the working directory.
            content: The text to write.
            append: Add to the end of the file instead of replacing it.
        """
        if not self.writable:
            raise PermissionError("the file tools are read-only")
        data = content.encode("utf-8")
        if len(data) > self.max_bytes:
            raise ValueError(
                f"content of {len(data)} bytes exceeds the {self.max_bytes}-byte limit"
            )
        target = resolve_inside(self.root, path)
        if target == self.root or target.is_dir():
            raise IsADirectoryError(f"{path!r} is a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        # Re-check after mkdir: a component may be a symlink created meanwhile.
        target = resolve_inside(self.root, path)
        with target.open("ab" if append else "wb") as fh:
            fh.write(data)
        return {
            "path": self._relative(target),
            "bytes_written": len(data),
            "size": target.stat().st_size,
        }

    def list_files(self, path: str = ".", recursive: bool = False) -> dict[str, Any]:
        """List the files and folders in a directory.

        Args:
            path: Directory relative to the working directory.
            recursive: Also list everything below it.
        """
        target = resolve_inside(self.root, path)
        if not target.is_dir():
            raise NotADirectoryError(f"no directory at {path!r}")
        entries: list[dict[str, Any]] = []
        truncated = False
        walker = sorted(target.rglob("*") if recursive else target.iterdir())
        for entry in walker:
            if len(entries) >= self.max_entries:
                truncated = True
                break
            real = entry.resolve()
            if real != self.root and not real.is_relative_to(self.root):
                continue  # a symlink pointing outside: not shown
            kind = "dir" if entry.is_dir() else "file"
            item: dict[str, Any] = {"path": entry.relative_to(self.root).as_posix(), "type": kind}
            if kind == "file":
                item["size"] = entry.stat().st_size
            entries.append(item)
        return {"path": self._relative(target), "entries": entries, "truncated": truncated}

    def tools(self) -> list[Tool]:
        """The tools: ``read_file``, ``list_files`` and (when writable) ``write_file``."""
        made = [
            tool(self.read_file, name=f"{self.prefix}read_file"),
            tool(self.list_files, name=f"{self.prefix}list_files"),
        ]
        if self.writable:
            made.append(tool(self.write_file, name=f"{self.prefix}write_file"))
        return made


def file_tools(
    root: str | os.PathLike[str],
    *,
    writable: bool = True,
    max_bytes: int = 256_000,
    prefix: str = "",
) -> list[Tool]:
    """Tools that read, write and list files under ``root`` and nowhere else."""
    return FileTools(Path(root), writable=writable, max_bytes=max_bytes, prefix=prefix).tools()
