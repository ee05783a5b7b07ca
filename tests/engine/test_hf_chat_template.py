"""HF jinja chat templates: rendering, tools, special tokens, errors."""

from __future__ import annotations

import pytest

from agentflow.engine.chat_template import ChatMessage, ToolSpec
from agentflow.engine.hf_chat_template import ChatTemplateError, HFChatTemplate, render_conversation

# A Qwen2-like template with tools, written for this test.
TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}<tools>{% for t in tools %}{{ t['function'] | tojson }}\n{% endfor %}</tools>{{ '\\n' }}{% endif %}"
    "{% for m in messages %}"
    "{% if m['role'] not in ['system', 'user', 'assistant', 'tool'] %}{{ raise_exception('bad role ' + m['role']) }}{% endif %}"
    "<|im_start|>{{ m['role'] }}{% if m.name %}:{{ m.name }}{% endif %}{{ '\\n' }}{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CONFIG = {"chat_template": TEMPLATE, "bos_token": {"content": "<s>"}, "eos_token": "<|im_end|>"}
TOOL = ToolSpec(
    "get_order", "Look up an order.", {"type": "object", "properties": {"id": {"type": "string"}}}
)


def test_renders_messages_tools_and_special_tokens() -> None:
    tpl = HFChatTemplate.from_tokenizer_config(CONFIG)
    assert tpl is not None
    text = tpl.render(
        [
            ChatMessage("user", "Where is order 5?"),
            ChatMessage("tool", '{"ok":true}', name="get_order"),
        ],
        [TOOL],
    )
    assert text.startswith("<s><tools>{")
    assert '"name": "get_order"' in text and '"description": "Look up an order."' in text
    assert "<|im_start|>user\nWhere is order 5?<|im_end|>\n" in text
    assert "<|im_start|>tool:get_order\n" in text
    assert text.endswith("<|im_start|>assistant\n")
    assert not tpl.render(
        [{"role": "user", "content": "hi"}], add_generation_prompt=False
    ).endswith("assistant\n")


def test_named_templates_and_absent_template() -> None:
    cfg = {
        "chat_template": [
            {"name": "tool_use", "template": "T"},
            {"name": "default", "template": "D"},
        ]
    }
    tpl = HFChatTemplate.from_tokenizer_config(cfg)
    assert tpl is not None and tpl.render([]) == "D"
    assert HFChatTemplate.from_tokenizer_config({}) is None


def test_errors_are_chat_template_errors() -> None:
    tpl = HFChatTemplate.from_tokenizer_config(CONFIG)
    assert tpl is not None
    with pytest.raises(ChatTemplateError, match="bad role narrator"):
        tpl.render([{"role": "narrator", "content": "x"}])
    broken = HFChatTemplate("{% for %}", {})
    with pytest.raises(ChatTemplateError, match="chat template error"):
        broken.render([])


def test_render_conversation_picks_the_template() -> None:
    msgs = [ChatMessage("user", "hi")]
    ours = render_conversation("agentflow", {}, msgs, [TOOL], instructions="Be brief.")
    assert ours.startswith("<|system|>Be brief.") and ours.endswith("<|assistant|>")
    theirs = render_conversation("qwen2", CONFIG, msgs, instructions="Be brief.")
    assert "<|im_start|>system\nBe brief.<|im_end|>" in theirs
    assert render_conversation("llama", {}, msgs) == "hi"
