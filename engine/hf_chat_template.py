"""HF chat templates: the jinja2 ``chat_template`` of a ``tokenizer_config.json``.

Third-party checkpoints (LLaDA, Dream, Llama, Qwen2) ship their conversation
format as a jinja2 template. It is rendered in a sandbox with the variables
the HF ecosystem provides: ``messages``, ``tools`` (OpenAI-style function
specs), ``add_generation_prompt``, the special tokens (``bos_token``,
``eos_token``, ...), ``raise_exception`` and ``strftime_now``.
:func:`render_conversation` picks the right template for a loaded checkpoint:
our embedded template for the ``agentflow`` format, the checkpoint's own
otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .chat_template import ChatMessage, ToolSpec, render_prompt
from .errors import EngineError

_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token")


class ChatTemplateError(EngineError):
    """A chat template failed to compile or render (the message says why)."""


def _raise(message: str) -> None:
    raise ChatTemplateError(f"chat template refused the conversation: {message}")


def _tojson(
    value: Any, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False
) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)


def _token_text(value: Any) -> str:
    """Special tokens appear as plain strings or as ``{"content": ...}`` objects."""
    if isinstance(value, Mapping):
        return str(value.get("content", ""))
    return "" if value is None else str(value)


def tool_to_openai(tool: ToolSpec) -> dict[str, Any]:
    """A tool as the OpenAI-style function spec HF templates expect."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.parameters),
        },
    }


def message_to_dict(message: ChatMessage | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(message, ChatMessage):
        out: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.name is not None:
            out["name"] = message.name
        return out
    return dict(message)


@dataclass(frozen=True)
class HFChatTemplate:
    """A compiled HF chat template and the special tokens it may refer to."""

    source: str
    special_tokens: Mapping[str, str]

    @classmethod
    def from_tokenizer_config(cls, config: Mapping[str, Any]) -> HFChatTemplate | None:
        """The template of a ``tokenizer_config.json`` (None when it has none)."""
        tpl = config.get("chat_template")
        if isinstance(tpl, list):  # named templates
            named = {t.get("name"): t.get("template") for t in tpl if isinstance(t, Mapping)}
            tpl = named.get("default") or next(iter(named.values()), None)
        if not isinstance(tpl, str):
            return None
        special = {k: _token_text(config.get(k)) for k in _SPECIAL_KEYS if k in config}
        return cls(tpl, special)

    def render(
        self,
        messages: Sequence[ChatMessage | Mapping[str, Any]],
        tools: Sequence[ToolSpec] = (),
        *,
        add_generation_prompt: bool = True,
        **variables: Any,
    ) -> str:
        """Render a conversation; a template error raises :class:`ChatTemplateError`."""
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        try:
            template = env.from_string(self.source)
            return template.render(
                messages=[message_to_dict(m) for m in messages],
                tools=[tool_to_openai(t) for t in tools] or None,
                add_generation_prompt=add_generation_prompt,
                **self.special_tokens,
                **variables,
            )
        except ChatTemplateError:
            raise
        except TemplateError as exc:
            raise ChatTemplateError(f"chat template error: {exc}") from exc


def render_conversation(
    fmt: str,
    tokenizer_config: Mapping[str, Any],
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec] = (),
    *,
    instructions: str | None = None,
) -> str:
    """The prompt text for a checkpoint of format ``fmt``, ending where the answer starts.

    ``agentflow`` checkpoints use the embedded template; others use their own HF
    template (instructions become a system message). A foreign checkpoint
    without a template gets the messages' text joined by newlines.
    """
    if fmt == "agentflow":
        return render_prompt(messages, tools, instructions=instructions)
    msgs: list[ChatMessage] = list(messages)
    if instructions:
        msgs.insert(0, ChatMessage("system", instructions))
    template = HFChatTemplate.from_tokenizer_config(tokenizer_config)
    if template is None:
        return "\n".join(m.content for m in msgs)
    return template.render(msgs, tools)
