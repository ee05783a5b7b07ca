"""The embedded chat template: tools as signature lines, the structured output's line."""

from __future__ import annotations

from agentflow.engine.chat_template import (
    ASSISTANT,
    TOOLS,
    USER,
    ChatMessage,
    ToolSpec,
    render_choice_prior,
    render_output,
    render_prompt,
    with_request,
)

ORDER = ToolSpec(
    "get_order",
    "Look up an order.",
    {
        "type": "object",
        "properties": {"order_id": {"type": "string", "description": "The order number"}},
        "required": ["order_id"],
    },
)
REPORT = {
    "type": "object",
    "description": "The agent's final output.",
    "properties": {
        "status": {"enum": ["ok", "warning", "critical"]},
        "summary": {"type": "string", "description": "One sentence."},
        "actions": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["status", "summary"],
}
ASK = [ChatMessage("user", "Where is order 58213?")]


def test_tools_render_as_signature_lines() -> None:
    text = render_prompt(ASK, [ORDER], instructions="Be brief.")
    assert text == (
        "<|system|>Be brief.\n"
        f"{TOOLS}get_order(order_id: string) - Look up an order. Args: order_id: The order number\n"
        f"{USER}Where is order 58213?\n{ASSISTANT}"
    )


def test_a_structured_output_is_one_more_line_of_the_tools_block() -> None:
    line = render_output(REPORT)
    assert line == (
        'final: {status: "ok"|"warning"|"critical", summary: string, actions?: [string]}'
        " - The agent's final output. Fields: summary: One sentence."
    )
    text = render_prompt(ASK, [ORDER], output=REPORT)
    assert text.index("get_order(") < text.index(line) < text.index(USER)
    # with no tools the block holds the output line alone
    assert render_prompt(ASK, output=REPORT).startswith(f"{TOOLS}{line}\n{USER}")
    # the choice prior sees the same line
    prior = render_choice_prior(ASK, [ORDER], output=REPORT)
    assert prior is not None and line in prior


def test_a_text_answer_adds_nothing() -> None:
    assert render_output(None) is None and render_output({"type": "string"}) is None
    plain = render_prompt(ASK, [ORDER])
    assert render_prompt(ASK, [ORDER], output={"type": "string"}) == plain
    assert TOOLS not in render_prompt(ASK)


def test_with_request_puts_a_new_request_in_place_of_the_last_one() -> None:
    earlier = ChatMessage("user", "hello")
    asked = [earlier, ChatMessage("user", "check 58213. cancel 60417")]
    assert with_request(asked, "cancel 60417") == [earlier, ChatMessage("user", "cancel 60417")]
    assert asked[-1].content == "check 58213. cancel 60417"  # the conversation is not changed
    went_on = [*asked, ChatMessage("tool", "{}", name="get_order")]
    assert with_request(went_on, "cancel 60417") is None
    assert with_request([], "x") is None
