"""Argument fit: tools the request's values cannot fill lose score on the tool-name choice."""

from __future__ import annotations

from typing import Any

import pytest

from agentflow.engine.argument_fit import (
    argument_fit,
    fit_bonuses,
    gives_address,
    gives_count,
    misfits,
    named_numbers,
    names_account,
    value_kind,
)
from agentflow.engine.chat_template import ToolSpec
from agentflow.engine.tool_priors import step_bonuses


def tool(name: str, description: str, required: dict[str, Any], **optional: Any) -> ToolSpec:
    properties = {**required, **optional}
    return ToolSpec(
        name, description, {"type": "object", "properties": properties, "required": list(required)}
    )


STRING = {"type": "string"}
FIND_ORDER = tool("find_order", "Return order details", {"id": STRING})
GET_CUSTOMER = tool("get_customer", "Search customers", {"contact": STRING})
REFUND = tool("refund_order", "Send money back", {"id": STRING, "amount": {"type": "number"}})
NOTIFY = tool("notify", "Email a note to an address", {"address": STRING, "body": STRING})
SCALE = tool("set_workers", "Scale a deployment", {"name": STRING, "size": {"type": "integer"}})
TOOLS = [FIND_ORDER, GET_CUSTOMER, REFUND, NOTIFY, SCALE]


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("omar@initech.io", "email"),
        ("40", "number"),
        ("$18.50", "number"),
        ("#86669", "number"),
        ("5.2.10", "version"),
        ("v0.27.17", "version"),
        ("ord_45547", "text"),
        ("web-prod-03", "text"),
    ],
)
def test_values_have_a_kind(value: str, kind: str) -> None:
    assert value_kind(value) == kind


def test_an_email_fits_the_tools_that_take_one() -> None:
    fit = argument_fit("look up omar@initech.io", TOOLS)  # not a question: nothing else counts
    # get_customer's parameter says "contact"; notify's description says "email"
    # (its "body" is free text, so nothing is missing).
    assert fit["get_customer"] == 0
    assert fit["notify"] == 0
    assert fit["find_order"] == -1  # an e-mail and nowhere to put one
    assert fit["refund_order"] == -2  # and no number for its amount either


def test_a_required_number_needs_a_number_in_the_request() -> None:
    fit = argument_fit("find my order ord_45547", TOOLS)
    assert fit["find_order"] == 0
    assert fit["refund_order"] == -1
    assert fit["set_workers"] == -1
    assert argument_fit("we need 40 memcached pods", TOOLS)["set_workers"] == 0
    # A version is not a count (and set_workers has no place for one either).
    assert argument_fit("push 5.2.10 of grafana", TOOLS)["set_workers"] == -2


def test_snake_case_names_are_read_word_by_word() -> None:
    deploy = tool("roll_out_service", "", {"name": STRING, "build_version": STRING})
    scale = tool("set_replicas", "", {"name": STRING, "size": {"type": "integer"}})
    fit = argument_fit("we need 23 billing-worker pods", [deploy, scale])
    # no version given, and no number to take the count
    assert fit == {"roll_out_service": -2.0, "set_replicas": 0.0}
    lookup = tool("get_customer_by_email", "", {"query": STRING})
    assert argument_fit("do we know a@b.io", [lookup, FIND_ORDER])["get_customer_by_email"] == 0


def test_a_version_fits_the_tools_that_take_one() -> None:
    deploy = tool("roll_out", "Ship a build", {"name": STRING, "tag": STRING, "env": STRING})
    restart = tool(
        "cycle_unit",
        "Restart one service",
        {"machine": {"type": "string", "description": "Which machine, e.g. build-dev-1."}},
    )
    fit = argument_fit("put node-exporter v0.27.17 on qa", [deploy, restart])
    assert fit == {"roll_out": 0.0, "cycle_unit": -1.0}
    # The example host in a description ("build-dev-1") says nothing of versions.
    assert argument_fit("restart nginx on web-1", [deploy, restart]) == {
        "roll_out": -1.0,  # its "tag" wants a version
        "cycle_unit": 0.0,
    }


def test_a_number_that_names_an_order_is_no_amount() -> None:
    fit = argument_fit("order 962414 came late, I want my money back", TOOLS)
    assert fit["refund_order"] == -1  # nothing says how much
    assert fit["find_order"] == 0
    assert argument_fit("refund 473 dollars for my purchase 418811", TOOLS)["refund_order"] == 0
    assert argument_fit("handle 614836 please", TOOLS)["refund_order"] == 0  # could be either


def test_each_number_fills_one_parameter() -> None:
    two = tool("resize", "", {"cpu": {"type": "integer"}, "memory": {"type": "integer"}})
    assert misfits(two, ["4"]) == 1
    assert misfits(two, ["4", "16"]) == 0


def test_enums_and_optional_parameters_are_not_read() -> None:
    plan = tool(
        "switch_plan",
        "Switch the billing plan",
        {"tier": {"type": "integer", "enum": [1, 2, 3]}},
        limit={"type": "integer"},
    )
    assert misfits(plan, []) == 0


def test_the_clause_that_fits_best_counts() -> None:
    # Two requests in one message: each tool fits one of the clauses.
    request = "refund 18.50 on ord_1. and then is there an account with a@b.io"
    fit = argument_fit(request, TOOLS)
    assert fit["refund_order"] == 0
    assert fit["get_customer"] == 0
    # A clause without values ("asap please") is no clause a tool fits.
    assert argument_fit("do we know a@b.io? - asap please", TOOLS)["find_order"] == -1
    assert argument_fit("good morning. we need more workers", TOOLS)["set_workers"] == -1


def test_bonuses_are_penalties_scaled_by_the_weight() -> None:
    bonuses = fit_bonuses("look up omar@initech.io", TOOLS, 6.0)
    assert bonuses == {
        "find_order": -6.0,
        "get_customer": 0.0,
        "refund_order": -12.0,
        "notify": 0.0,
        "set_workers": -12.0,
    }
    assert fit_bonuses("do we know omar@initech.io?", TOOLS, 0.0) == {}
    assert fit_bonuses("do we know omar@initech.io?", [FIND_ORDER], 6.0) == {}
    # Every tool fits: nothing to prefer.
    assert fit_bonuses("look up ord_1", [FIND_ORDER, NOTIFY], 6.0) == {}
    # A parameter named for an e-mail needs one.
    assert fit_bonuses("look up ord_1", [FIND_ORDER, GET_CUSTOMER], 6.0)["get_customer"] == -6.0


def test_a_step_adds_the_fit_to_the_other_tool_bonuses() -> None:
    request = "do we know omar@initech.io?"
    off = {"relevance_weight": 7.0, "similarity_weight": 0.0, "answer_bonus": 0.0}
    without = step_bonuses(request, TOOLS, vectors=None, **off)
    with_fit = step_bonuses(request, TOOLS, vectors=None, fit_weight=6.0, **off)
    assert with_fit.tools == without.tools
    assert with_fit.lasting == fit_bonuses(request, TOOLS, 6.0)
    assert without.lasting == {}
    with pytest.raises(ValueError, match="argument fit weight"):
        step_bonuses(request, TOOLS, vectors=None, fit_weight=-1.0, **off)


def test_a_list_of_values_needs_an_array_parameter() -> None:
    cycle = tool("cycle_daemon", "Restart a service", {"machine": STRING, "name": STRING})
    reboot = tool("reset_hosts", "Power-cycle servers", {"targets": {"type": "array"}})
    maybe_list = {"anyOf": [{"type": "array"}, {"type": "null"}]}
    optional = tool("reset_some", "Power-cycle servers", {}, targets=maybe_list)
    tools = [cycle, reboot, optional]

    three = argument_fit("restart hosts gw-eu, edge-prod4 & mail-prod please", tools)
    assert three == {"cycle_daemon": -1.0, "reset_hosts": 0.0, "reset_some": 0.0}
    assert argument_fit("restart hosts db20 & proxy-qa", tools)["cycle_daemon"] == -1.0
    # a service and its host are no list, nor is a value followed by a word
    assert argument_fit("restart nginx on web-1", tools)["cycle_daemon"] == 0.0
    assert argument_fit("I'm customer C-9520, use it", tools)["cycle_daemon"] == 0.0
    # a clause without the list counts too
    both = "cycle celery at gw-20 and then web-1, web-2 and web-3 need a reboot"
    assert argument_fit(both, tools)["cycle_daemon"] == 0.0


def test_an_email_alone_gives_no_account_id() -> None:
    change = tool(
        "modify_email", "Replace the account email", {"client_id": STRING, "emailAddress": STRING}
    )
    tools = [change, GET_CUSTOMER, NOTIFY]

    fit = argument_fit("find the account with bhaas@inbox.dev", tools)
    assert fit == {"modify_email": -1.0, "get_customer": 0.0, "notify": 0.0}  # a body is free text
    assert argument_fit("set email a@b.io on account cus_55", tools)["modify_email"] == 0.0


@pytest.mark.parametrize(
    ("clause", "counted"),
    [
        ("we need 43 etcd pods", True),
        ("read sshd logs from mail-14 just 344 lines", True),
        ("cancel 9002 for me", False),
        ("order 6666 needs to be cancelled", False),  # the number names the order
        ('log a sev2 for "12 servers down"', False),  # quoted: a title
        ("restart hosts web-12 servers", False),  # inside a host, not a count
    ],
)
def test_a_count_is_a_number_before_a_plural_noun(clause: str, counted: bool) -> None:
    assert gives_count(clause, named_numbers(clause)) is counted


def test_a_count_misfits_a_tool_with_nowhere_to_put_it() -> None:
    restart = tool("cycle_service", "Restart a service", {"name": STRING, "machine": STRING})
    scale = tool("set_workers", "", {"name": STRING, "size": {"type": "integer"}})
    reboot = tool("reset_nodes", "", {"targets": {"type": "array", "items": STRING}})
    fit = argument_fit("we need 7 nginx pods", [restart, scale, reboot])
    assert fit == {"cycle_service": -1.0, "set_workers": 0.0, "reset_nodes": 0.0}


def test_an_email_and_an_account_id_misfit_a_tool_with_no_slot_for_the_id() -> None:
    change = tool(
        "modify_email", "Replace the account email", {"client_id": STRING, "emailAddress": STRING}
    )
    reset = tool("recover_password", "Start a password reset", {"emailAddress": STRING})
    tools = [change, reset, GET_CUSTOMER]
    fit = argument_fit("I'm customer 628, use noah42@corp.org from now on", tools)
    assert fit == {"modify_email": 0.0, "recover_password": -1.0, "get_customer": -1.0}
    # an e-mail alone names no account: the look-up and the reset fit
    alone = argument_fit("noah42@corp.org can't log in, please reset", tools)
    assert alone["recover_password"] == 0.0
    assert alone["get_customer"] == 0.0


@pytest.mark.parametrize(
    ("clause", "named"),
    [
        ("I'm customer C-9520, use emma16@fastmail.fm", True),
        ("set email x@y.io on account 4637", True),
        ("look up customer ana8@example.com", False),  # the digit is the e-mail's
        ("customer care is great", False),
    ],
)
def test_an_account_id_is_named_as_one(clause: str, named: bool) -> None:
    assert names_account(clause) is named


SEVERITY = {"type": "string", "enum": ["sev1", "sev2", "sev3", "sev4"]}
RAISE = tool("raise_incident", "Page on-call for an outage", {"name": STRING, "level": SEVERITY})
READ_LOGS = tool("show_logs", "Read the logs of a service", {"machine": STRING, "name": STRING})
ROLE = {"type": "string", "enum": ["viewer", "editor", "admin"]}
ASSIGN = tool("assign_role", "Assign a role", {"account": STRING, "group": ROLE})


def test_a_member_of_another_tools_enum_misfits_a_tool_without_it() -> None:
    request = 'Log a sev1 for "Mobile app crashes on start"'
    assert argument_fit(request, [RAISE, READ_LOGS]) == {"raise_incident": 0.0, "show_logs": -1.0}
    # A clause with other values may hold a second request: the member alone says nothing.
    both = 'log a sev4 for "Disk full" and restart nginx on web-1'
    assert argument_fit(both, [RAISE, READ_LOGS]) == {"raise_incident": 0.0, "show_logs": 0.0}
    # A member no listed tool takes is an ordinary value.
    assert argument_fit("ycosta needs viewer rights", [RAISE, READ_LOGS]) == {
        "raise_incident": 0.0,
        "show_logs": 0.0,
    }
    assert argument_fit("ycosta needs viewer rights", [RAISE, ASSIGN])["assign_role"] == 0.0


ADDRESS = {
    "type": "object",
    "properties": {"street": STRING, "city": STRING, "zip": STRING},
    "required": ["street", "city", "zip"],
}
REDIRECT = tool("fix_address", "", {"id": STRING, "shipping_address": ADDRESS})


@pytest.mark.parametrize(
    ("clause", "given"),
    [
        ("Can 2470 be redirected to 40 Cedar Ave, Berlin 98686?", True),
        ("new delivery address for 1688: 136 Elm St, New York 10001", True),
        ("refund 40 EUR, order 12345", False),
        ("restart web-1, web-2 and db 12345", False),
        ('note "40 Cedar Ave, Berlin 98686" for later', False),  # quoted: a message's text
    ],
)
def test_a_postal_address_is_a_street_a_town_and_a_postcode(clause: str, given: bool) -> None:
    assert gives_address(clause) is given


def test_an_address_misfits_a_tool_that_takes_none() -> None:
    request = "Can 2470 be redirected to 40 Cedar Ave, Berlin 98686?"
    assert argument_fit(request, [REDIRECT, SCALE]) == {"fix_address": 0.0, "set_workers": -1.0}
