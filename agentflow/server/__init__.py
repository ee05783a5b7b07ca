"""``agentflow serve``: the engine behind an OpenAI-compatible HTTP API."""

from __future__ import annotations

from .app import OpenAIServer, create_app
from .background import BackgroundServer
from .errors import APIError

__all__ = ["APIError", "BackgroundServer", "OpenAIServer", "create_app"]
