"""Server-sent events in the OpenAI ``chat.completion.chunk`` format.

Tool calls and structured outputs are sent whole once the step is done (they are
only meaningful once they validate). A plain-text answer is streamed as the
engine's drafts grow: each draft is action JSON (``{"final":"...``) whose
string prefix is decoded and the new characters are sent as a content delta.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from agentflow.engine.chat_template import MASK

logger = logging.getLogger(__name__)

_FINAL_TEXT_PREFIX = '{"final":"'


def sse(payload: dict[str, Any] | str) -> str:
    """One SSE event carrying ``payload`` (a dict is sent as JSON)."""
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n"


def text_prefix(draft: str) -> str | None:
    """The decoded part of a text answer in a partial action draft; None if the draft is not one."""
    # A block may end inside a multi-byte character: its bytes decode to U+FFFD until the
    # next block completes it, so a trailing replacement character is held back.
    draft = draft.split(MASK, 1)[0].rstrip("\ufffd")
    if not draft.startswith(_FINAL_TEXT_PREFIX):
        return None
    body = draft[len(_FINAL_TEXT_PREFIX) :]
    cut = 0
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == '"':
            break
        if ch == "\\":
            if i + 1 >= len(body):
                break
            if body[i + 1] == "u":
                if i + 6 > len(body):
                    break
                code = int(body[i + 2 : i + 6], 16) if _is_hex(body[i + 2 : i + 6]) else -1
                if code < 0:
                    break
                if 0xD800 <= code < 0xDC00:  # high surrogate: needs its low half
                    if i + 12 > len(body) or body[i + 6 : i + 8] != "\\u":
                        break
                    i += 12
                else:
                    i += 6
            else:
                i += 2
        else:
            i += 1
        cut = i
    try:
        return json.loads('"' + body[:cut] + '"')
    except json.JSONDecodeError:
        return None


def _is_hex(text: str) -> bool:
    return len(text) == 4 and all(c in "0123456789abcdefABCDEF" for c in text)


@dataclass
class ChunkWriter:
    """Builds the chunks of one streamed completion."""

    completion_id: str
    created: int
    model: str
    sent_text: str = ""

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            ],
        }

    def role(self) -> str:
        return sse(self.chunk({"role": "assistant", "content": ""}))

    def draft(self, draft: str) -> str | None:
        """A content delta for the new part of a text draft, or None."""
        text = text_prefix(draft)
        if text is None or not text.startswith(self.sent_text) or text == self.sent_text:
            return None
        new = text[len(self.sent_text) :]
        self.sent_text = text
        return sse(self.chunk({"content": new}))

    def finish_text(self, content: str) -> list[str]:
        """The rest of the content, then the finishing chunk."""
        out = []
        if content.startswith(self.sent_text):
            rest = content[len(self.sent_text) :]
            if rest:
                out.append(sse(self.chunk({"content": rest})))
        else:
            logger.warning(
                "streamed draft %r is not a prefix of the final answer; the client saw the draft",
                self.sent_text[:80],
            )
        out.append(sse(self.chunk({}, "stop")))
        return out

    def finish_tool_calls(self, calls: list[dict[str, Any]]) -> list[str]:
        out = [
            sse(self.chunk({"tool_calls": [{"index": i, **call}]})) for i, call in enumerate(calls)
        ]
        out.append(sse(self.chunk({}, "tool_calls")))
        return out

    def usage(self, usage: dict[str, Any]) -> str:
        return sse(
            {
                "id": self.completion_id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": usage,
            }
        )


async def aclose_quietly(stream: AsyncIterator[Any]) -> None:
    """Close an async generator if it is one (ends the model's work on client disconnect)."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
