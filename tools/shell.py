"""A sandboxed shell tool: allow-listed commands, run without a shell, inside a root directory.

The model gives one command line; it is split with :func:`shlex.split` (no shell
ever sees it, so ``;``, ``|``, ``$()`` and globs are plain characters). The
program must be on the allow-list (a bare name, looked up on a fixed ``PATH``);
arguments that name paths outside the root (absolute paths, ``..``) are refused;
the working directory is the root; the environment is scrubbed to ``PATH``,
``HOME`` (the root), ``LANG`` and what the caller passes explicitly. The process
gets a timeout (its whole process group is killed) and its output is capped.

This confines a cooperative model, not a hostile program: an allow-listed
binary can still do whatever it can do (``find -delete``, an interpreter...).
Allow only commands whose every use is acceptable, and use OS-level isolation
(container, user namespace) where that matters.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, Process

from agentflow.tool import Tool, tool

from .errors import CommandNotAllowedError, PathOutsideRootError, ToolConfigError
from .files import resolve_inside

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


class ShellTool:
    """Runs allow-listed commands under ``root``; ``tool()`` gives the :class:`Tool`."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        allow: Sequence[str],
        *,
        name: str = "shell",
        timeout: float = 10.0,
        max_output: int = 64_000,
        env: Mapping[str, str] | None = None,
        path: str = DEFAULT_PATH,
    ) -> None:
        root_path = Path(root).expanduser()
        if not root_path.is_dir():
            raise ToolConfigError(f"shell root {str(root_path)!r} is not a directory")
        if not allow:
            raise ToolConfigError("the shell tool needs a non-empty allow-list of commands")
        self.root = root_path.resolve()
        self.path = path
        self.programs: dict[str, str] = {}
        for command in allow:
            if "/" in command or not command:
                raise ToolConfigError(f"allow-list entries are bare command names, got {command!r}")
            found = shutil.which(command, path=path)
            if found is None:
                raise ToolConfigError(f"allowed command {command!r} is not on PATH {path!r}")
            self.programs[command] = found
        if timeout <= 0 or max_output <= 0:
            raise ToolConfigError("timeout and max_output must be positive")
        self.name = name
        self.timeout = timeout
        self.max_output = max_output
        self.env = {"PATH": path, "HOME": str(self.root), "LANG": "C.UTF-8", **(env or {})}

    def parse(self, command: str) -> list[str]:
        """The argv for ``command``; refuses programs off the allow-list and paths outside the root."""
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"cannot parse the command line: {exc}") from exc
        if not argv:
            raise ValueError("empty command")
        program = argv[0]
        if program not in self.programs:
            allowed = ", ".join(sorted(self.programs))
            raise CommandNotAllowedError(f"command {program!r} is not allowed (allowed: {allowed})")
        for arg in argv[1:]:
            self._check_argument(arg)
        return [self.programs[program], *argv[1:]]

    def _check_argument(self, arg: str) -> None:
        # An option's value may be a path too: --output=/etc/x
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        looks_like_path = value.startswith(("/", "~")) or ".." in value.split("/")
        if looks_like_path:
            if value.startswith("~"):
                raise PathOutsideRootError(f"argument {arg!r}: '~' paths are not allowed")
            try:
                resolve_inside(self.root, value)
            except PathOutsideRootError:
                raise PathOutsideRootError(
                    f"argument {arg!r} names a path outside the working directory"
                ) from None

    async def _drain(
        self, stream: ByteReceiveStream | None, sink: bytearray, state: dict[str, bool]
    ) -> None:
        if stream is None:
            return
        async for piece in stream:
            room = self.max_output - len(sink)
            if len(piece) > room:
                sink += piece[: max(room, 0)]
                state["truncated"] = True
            else:
                sink += piece

    def _kill(self, process: Process) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    async def run(self, command: str) -> dict[str, Any]:
        """Run one command line in the working directory and return its exit code and output.

        Args:
            command: The command line, e.g. "ls -l logs". No shell features (pipes, redirection, variables).
        """
        argv = self.parse(command)
        stdout, stderr = bytearray(), bytearray()
        state = {"truncated": False, "timed_out": False}
        process = await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            cwd=self.root,
            env=self.env,
            start_new_session=True,
        )
        try:
            with anyio.move_on_after(self.timeout) as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._drain, process.stdout, stdout, state)
                    tg.start_soon(self._drain, process.stderr, stderr, state)
                    await process.wait()
            if scope.cancelled_caught:
                state["timed_out"] = True
        finally:
            if process.returncode is None:
                self._kill(process)
                with anyio.CancelScope(shield=True):
                    await process.wait()
            await process.aclose()
        return {
            "exit_code": None if state["timed_out"] else process.returncode,
            "stdout": stdout.decode("utf-8", errors="replace"),
            "stderr": stderr.decode("utf-8", errors="replace"),
            "timed_out": state["timed_out"],
            "truncated": state["truncated"],
        }

    def tool(self) -> Tool:
        """The tool, described with its allow-list."""
        allowed = ", ".join(sorted(self.programs))
        return tool(
            self.run,
            name=self.name,
            description=f"Run a command in the working directory. Allowed commands: {allowed}.",
        )


def shell_tool(
    root: str | os.PathLike[str],
    allow: Sequence[str],
    *,
    name: str = "shell",
    timeout: float = 10.0,
    max_output: int = 64_000,
    env: Mapping[str, str] | None = None,
) -> Tool:
    """A tool that runs allow-listed commands under ``root`` (see the module docstring for the limits)."""
    return ShellTool(root, allow, name=name, timeout=timeout, max_output=max_output, env=env).tool()
