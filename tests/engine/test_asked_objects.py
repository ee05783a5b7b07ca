"""The thing a request is about: a tool about another thing misfits."""

from __future__ import annotations

import pytest

from agentflow.engine.argument_fit import argument_fit
from agentflow.engine.asked_objects import asked_objects, serves_other_objects, tool_objects
from agentflow.engine.chat_template import ToolSpec

ID = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
ORDER_ID = {
    "type": "object",
    "properties": {"id": {"type": "string", "description": "The order reference, e.g. 19416."}},
    "required": ["id"],
}
FIND = ToolSpec("find_order", "Return order details", ID)
INVOICE = ToolSpec("showInvoiceDetails", "Show the amount and status of an invoice", ID)
TRACK = ToolSpec("locate_delivery", "", ID)
ADDRESS = ToolSpec("update_address", "Change where an order ships", ORDER_ID)
RESTART = ToolSpec("restart_service", "Restart one service on one server", ID)
TOOLS = [FIND, INVOICE, TRACK, ADDRESS, RESTART]


@pytest.mark.parametrize(
    ("tool", "kinds"),
    [
        (FIND, {"order"}),
        (INVOICE, {"invoice"}),
        (TRACK, {"shipment"}),  # "delivery" in the name: a shipment's tool
        (ADDRESS, {"order", "shipment"}),  # "ships"
        (ToolSpec("lookup", "", ORDER_ID), {"order"}),  # a parameter's description
        (ToolSpec("find_purchase", "", ID), {"order"}),
        (RESTART, set()),
        (ToolSpec("mevagu", "", ID), set()),
    ],
)
def test_a_tool_is_about_the_things_its_words_name(tool: ToolSpec, kinds: set[str]) -> None:
    assert tool_objects(tool) == kinds


@pytest.mark.parametrize(
    ("clause", "kinds"),
    [
        ("I want to know about my purchase 588450", {"order"}),
        ("tracking info for 27282 please", {"shipment"}),
        ("Tracknig info for #12844 plesae", {"shipment"}),  # two letters swapped
        ("is my package 34744 out for delivery?", {"shipment"}),
        ("what's the status of odrer 878053", {"order"}),
        ("Status of ORD-12525?", {"order"}),  # an id led by the noun's first letters
        ("due date for INV-2026-3437?", {"invoice"}),
        ("Status of ST8160?", set()),
        ("new delivery address for 1688: 136 Elm St", set()),  # where an order goes
        ("refund SO-98048 because the package was empty", set()),  # a reason: why, not what
        ('log a sev2 for "Invoice shows wrong VAT"', set()),  # quoted: a title
        ("qa needs billing-worker at 7.1.18", set()),  # a value, not a noun
    ],
)
def test_a_clause_names_the_things_it_is_about(clause: str, kinds: set[str]) -> None:
    assert asked_objects(clause) == kinds


def test_a_tool_about_another_thing_misfits_and_a_shipment_serves_an_order() -> None:
    assert not serves_other_objects(FIND, set())
    assert serves_other_objects(INVOICE, {"order"})
    assert not serves_other_objects(TRACK, {"order"})  # "where is my order" wants tracking
    assert serves_other_objects(FIND, {"shipment"})
    assert not serves_other_objects(RESTART, {"shipment"})  # about nothing: untouched


def test_argument_fit_counts_the_misfit_per_clause() -> None:
    fit = argument_fit("quick one: I want to know about my purchase 588450", [FIND, INVOICE])
    assert fit == {"find_order": 0.0, "showInvoiceDetails": -1.0}
    fit = argument_fit("tracking info for ORD-15237 please", [FIND, TRACK])
    assert fit == {"find_order": -1.0, "locate_delivery": 0.0}
    # Two clauses, two things: each tool fits the clause about its own.
    fit = argument_fit("Status of order 314535?. send me invoice INV-2026-5207", [FIND, INVOICE])
    assert fit == {"find_order": 0.0, "showInvoiceDetails": 0.0}
