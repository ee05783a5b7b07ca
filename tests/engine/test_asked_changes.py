"""The change a request asks for: a tool making another kind of change misfits."""

from __future__ import annotations

import pytest

from agentflow.engine.argument_fit import argument_fit
from agentflow.engine.asked_changes import asked_kinds, owes_change, tool_kinds, unasked_changes
from agentflow.engine.chat_template import ChatMessage, ToolSpec, called_since_request
from agentflow.engine.tool_priors import step_bonuses
from agentflow.engine.tool_similarity import WordVectors

ID = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
STOP = ToolSpec("stopPurchase", "Stop an order before shipping", ID)
REFUND = ToolSpec("refund_order_purchase", "Send money back to the customer", ID)
FIND = ToolSpec("find_order", "Return order details", ID)
RESET = ToolSpec("resetMachines", "Power-cycle a list of servers", ID)
DEACTIVATE = ToolSpec("deactivate_user_account", "", ID)
TOOLS = [STOP, REFUND, FIND, RESET, DEACTIVATE]


@pytest.mark.parametrize(
    ("tool", "kinds"),
    [
        (STOP, {"cancel"}),
        (REFUND, {"refund"}),
        (FIND, set()),
        (RESET, {"restart"}),  # "reset" names no kind; the description's "cycle" does
        (DEACTIVATE, {"disable"}),
        (ToolSpec("mevagu", "", ID), set()),
    ],
)
def test_a_tool_makes_the_kind_of_change_its_name_or_description_says(
    tool: ToolSpec, kinds: set[str]
) -> None:
    assert tool_kinds(tool) == kinds


@pytest.mark.parametrize(
    ("request_text", "kinds"),
    [
        ("can you void 740991? and send a confirmation", {"cancel"}),
        ("canecl 134861 for me", {"cancel"}),  # two letters swapped
        ("can I get 56.90 EUR bcak for 230121?", {"refund"}),
        ("order 97303 arrived broken, I want my money back", {"refund"}),
        ("turn off login ines", {"disable"}),
        ("I'm locked out, reset my password", set()),
        ('ticket: "stop the build" for web-1', set()),  # quoted: a title
        ("put CUST-1 on free", set()),
    ],
)
def test_a_request_names_the_kinds_of_change_it_asks_for(
    request_text: str, kinds: set[str]
) -> None:
    assert asked_kinds(request_text) == kinds


def test_tools_of_a_kind_the_request_does_not_name_misfit() -> None:
    assert unasked_changes("can you void 740991?", TOOLS) == {
        "refund_order_purchase",
        "resetMachines",
        "deactivate_user_account",
    }
    assert unasked_changes("cancel 1 and refund 2", TOOLS) == {
        "resetMachines",
        "deactivate_user_account",
    }
    assert unasked_changes("put CUST-1 on free", TOOLS) == set()


def test_argument_fit_counts_the_misfit() -> None:
    fit = argument_fit("hey, so can you void 740991? and send a confirmation", [STOP, REFUND, FIND])
    assert fit == {"stopPurchase": 0.0, "refund_order_purchase": -1.0, "find_order": 0.0}


def test_a_change_asked_for_and_not_made_yet_is_owed() -> None:
    request = "Refund everything on order 4604 because it defective"
    assert owes_change(request, TOOLS, ["find_order"])  # looked up: the refund is owed
    assert not owes_change(request, TOOLS, ["find_order", "refund_order_purchase"])
    assert not owes_change("where is order 4604?", TOOLS, ["find_order"])  # nothing asked
    # a called tool that changes state in a way no kind names: what it did is unknown
    mystery = ToolSpec("apply_order", "", ID)
    assert not owes_change(request, [*TOOLS, mystery], ["apply_order"])


def test_after_a_look_up_calling_gets_the_answer_bonus(vectors: WordVectors) -> None:
    request = "Refund everything on order 4604 because it defective"

    def keys(*called: str) -> dict[str, float]:
        weights = {"relevance_weight": 0.0, "similarity_weight": 0.0, "answer_bonus": 8.0}
        return step_bonuses(request, TOOLS, vectors=vectors, called=list(called), **weights).keys

    assert keys("find_order") == {"tool_calls": 8.0, "final": 0.0}
    assert keys("find_order", "refund_order_purchase") == {}


def test_the_tools_called_since_the_request() -> None:
    asked = [ChatMessage("user", "refund 4604"), ChatMessage("assistant", "{}")]
    looked = [*asked, ChatMessage("tool", "{}", name="find_order")]
    assert called_since_request(asked[:1]) is None
    assert called_since_request(looked) == ["find_order"]
