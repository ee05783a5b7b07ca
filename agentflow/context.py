"""What a tool may learn about the run that called it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from agentflow.engine.chat_template import ChatMessage

from .usage import RunUsage

DepsT = TypeVar("DepsT")


@dataclass
class RunContext(Generic[DepsT]):
    """Passed to a tool whose first parameter is annotated ``RunContext``; never part of its schema.

    ``deps`` is whatever the caller passed as ``agent.run(..., deps=...)`` (a database
    handle, an HTTP client, a user id): tools get their dependencies without globals.
    """

    run_id: str
    agent_name: str
    step: int
    deps: DepsT
    usage: RunUsage = field(default_factory=RunUsage)
    messages: Sequence[ChatMessage] = ()
    #: Id of the tool call being served (empty outside a tool call).
    call_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
