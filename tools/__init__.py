"""Ready-made tools: HTTP (httpx), SQLite records, a sandboxed shell, files.

Each factory returns :class:`agentflow.tool.Tool` objects to pass to an ``Agent``:

    from agentflow.tools import file_tools, http_tools, record_tools, shell_tool

    tools = [
        *http_tools("https://api.example.com/v1", name="orders_api"),
        *record_tools("shop.db", "tickets"),
        *file_tools("./workspace"),
        shell_tool("./workspace", allow=["ls", "grep", "wc"]),
    ]
"""

from __future__ import annotations

from .errors import (
    CommandNotAllowedError,
    PathOutsideRootError,
    RecordNotFoundError,
    ToolAccessError,
    ToolConfigError,
    URLNotAllowedError,
)
from .files import FileTools, file_tools
from .http import HttpTools, http_tools
from .records import RecordTools, record_tools
from .shell import ShellTool, shell_tool

__all__ = [
    "CommandNotAllowedError",
    "FileTools",
    "HttpTools",
    "PathOutsideRootError",
    "RecordNotFoundError",
    "RecordTools",
    "ShellTool",
    "ToolAccessError",
    "ToolConfigError",
    "URLNotAllowedError",
    "file_tools",
    "http_tools",
    "record_tools",
    "shell_tool",
]
