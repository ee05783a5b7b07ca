"""Helpers of the runtime tests: scripted FunctionModel functions and conversation readers."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from agentflow.engine.chat_template import ChatMessage
from agentflow.models.base import Action, StepRequest


def tool_messages(request: StepRequest) -> list[ChatMessage]:
    """Tool results since the last user turn."""
    out: list[ChatMessage] = []
    for msg in request.messages:
        if msg.role == "user":
            out = []
        elif msg.role == "tool":
            out.append(msg)
    return out


def script(*actions: Action | str | dict[str, Any]) -> Callable[[StepRequest], Any]:
    """A FunctionModel function that plays ``actions`` in order, one per step (repeating the last)."""
    state = {"i": 0}

    def play(request: StepRequest) -> Any:
        i = min(state["i"], len(actions) - 1)
        state["i"] += 1
        return actions[i]

    return play


def observations(request: StepRequest) -> dict[str, Any]:
    """{tool name: decoded observation} since the last user turn."""
    return {m.name or "": json.loads(m.content) for m in tool_messages(request)}


def last_user_text(messages: Sequence[ChatMessage]) -> str:
    return next(m.content for m in reversed(messages) if m.role == "user")
