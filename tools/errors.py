"""Exceptions of the ready-made tools. Raised inside a tool, they reach the model as observations."""

from __future__ import annotations


class ToolAccessError(PermissionError):
    """A tool refused a request that leaves what it was configured to allow."""


class URLNotAllowedError(ToolAccessError):
    """An HTTP tool was asked for a URL outside its allow-listed base URL."""


class PathOutsideRootError(ToolAccessError):
    """A file or shell tool was asked for a path outside its root directory."""


class CommandNotAllowedError(ToolAccessError):
    """The shell tool was asked to run a command that is not on its allow-list."""


class RecordNotFoundError(LookupError):
    """A records tool was asked to update a row that does not exist."""


class ToolConfigError(ValueError):
    """A tool factory was given a configuration it cannot honour (bad root, table, URL...)."""
