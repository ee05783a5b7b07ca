"""An argument named for an e-mail, a version or a path gets the request's one value of that kind."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentflow.engine.chat_template import ChatMessage, ToolSpec
from agentflow.engine.constraints.actions import action_schema
from agentflow.engine.slot_kinds import restore_slot_kinds

STRING = {"type": "string"}


def tool(tool_name: str, *parameters: str) -> ToolSpec:
    properties = dict.fromkeys(parameters, STRING)
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return ToolSpec(tool_name, "", schema)


MODIFY = tool("modify_email", "client_id", "emailAddress")
LOOKUP = tool("get_customer", "contact")
DEPLOY = tool("roll_out", "name", "build_version", "target_env")
TOOLS = [MODIFY, LOOKUP, DEPLOY]
SCHEMA = action_schema(TOOLS, None)


def action(tool_name: str, **arguments: Any) -> str:
    call = {"name": tool_name, "arguments": arguments}
    return json.dumps({"tool_calls": [call]}, separators=(",", ":"))


def asked(text: str) -> list[ChatMessage]:
    return [ChatMessage("user", text)]


@pytest.mark.parametrize(
    ("request_text", "written", "meant"),
    [
        (
            "i'm customer CUST-599, use eli64@mail.com from now on",
            action("modify_email", client_id="CUST-599", emailAddress=":"),
            action("modify_email", client_id="CUST-599", emailAddress="eli64@mail.com"),
        ),
        (
            "do we know kofinovak@corp.org?",
            action("get_customer", contact="do.co"),
            action("get_customer", contact="kofinovak@corp.org"),
        ),
        (
            "PUSH 9.22.3 OF memcached TO staging",
            action("roll_out", name="memcached", build_version="staging", target_env="staging"),
            action("roll_out", name="memcached", build_version="9.22.3", target_env="staging"),
        ),
        (  # The e-mail in its slot and beside it: the slot beside gets the value left.
            "set email sofia83@inbox.dev on account 36626",
            action("modify_email", client_id="sofia83@inbox.dev", emailAddress="sofia83@inbox.dev"),
            action("modify_email", client_id="36626", emailAddress="sofia83@inbox.dev"),
        ),
    ],
)
def test_the_one_value_of_the_kind_goes_into_its_slot(
    request_text: str, written: str, meant: str
) -> None:
    found = restore_slot_kinds(written, asked(request_text), TOOLS, SCHEMA)
    assert found is not None
    assert json.loads(found[0]) == json.loads(meant)


@pytest.mark.parametrize(
    ("request_text", "written"),
    [
        # The slot already holds a value of its kind.
        ("do we know a@b.io?", action("get_customer", contact="c@d.io")),
        # Two e-mails in the request: which one is meant is not for a rule to say.
        ("move a@b.io to c@d.io", action("get_customer", contact="x")),
        # No e-mail at all.
        ("do we know CUST-599?", action("get_customer", contact="CUST-599")),
        # The call already holds the e-mail in another argument.
        ("use a@b.io", action("modify_email", client_id="a@b.io", emailAddress="x")),
        # The e-mail twice, but no value left for the other slot, or two.
        ("use a@b.io", action("modify_email", client_id="a@b.io", emailAddress="a@b.io")),
        (
            "a@b.io on account 36626 or c150",
            action("modify_email", client_id="a@b.io", emailAddress="a@b.io"),
        ),
    ],
)
def test_nothing_is_guessed(request_text: str, written: str) -> None:
    assert restore_slot_kinds(written, asked(request_text), TOOLS, SCHEMA) is None


def test_only_the_step_right_after_its_request() -> None:
    written = action("get_customer", contact="do.co")
    after = [*asked("do we know a@b.io?"), ChatMessage("tool", "{}", name="get_customer")]
    assert restore_slot_kinds(written, after, TOOLS, SCHEMA) is None


DISK = tool("inspect_storage", "machine", "directory")


@pytest.mark.parametrize(
    ("request_text", "host", "written"),
    [
        ("Disk space on mq-us-5 please especially /home. it's kind of urgent", "mq-us-5", "urgent"),
        ("free space check for worker-us-3 especially /home - thanks a lot", "worker-us-3", "free"),
    ],
)
def test_an_argument_named_for_a_path_gets_the_requests_one_path(
    request_text: str, host: str, written: str
) -> None:
    found = restore_slot_kinds(
        action("inspect_storage", machine=host, directory=written), asked(request_text), [DISK]
    )
    assert found == (
        action("inspect_storage", machine=host, directory="/home"),
        [(written, "/home")],
    )


@pytest.mark.parametrize(
    "request_text",
    [
        "disk space on db-1 please",  # no path
        "disk space on db-1 for /home and /data",  # two paths: nothing is guessed
        'new ticket "full disk on /home" and check db-1',  # a path inside quoted text
    ],
)
def test_no_path_or_several_leave_the_argument_alone(request_text: str) -> None:
    text = action("inspect_storage", machine="db-1", directory="disk")
    assert restore_slot_kinds(text, asked(request_text), [DISK]) is None


def test_a_value_and_its_kind_swapped_between_two_slots_swap_back() -> None:
    swapped = action("modify_email", client_id="eli.doe@mail.com", emailAddress="c4207")
    request = asked("SET EMAIL eli.doe@mail.com ON ACCOUNT c4207 - it's kind of urgent")

    mended, pairs = restore_slot_kinds(swapped, request, TOOLS, SCHEMA)

    arguments = json.loads(mended)["tool_calls"][0]["arguments"]
    assert arguments == {"client_id": "c4207", "emailAddress": "eli.doe@mail.com"}
    assert sorted(pairs) == [("c4207", "eli.doe@mail.com"), ("eli.doe@mail.com", "c4207")]
    # the kind slot's value is nothing the request gives: no swap to make
    made_up = action("modify_email", client_id="eli.doe@mail.com", emailAddress="x")
    assert restore_slot_kinds(made_up, request, TOOLS, SCHEMA) is None


def test_of_two_emails_the_one_no_call_holds_is_restored() -> None:
    reset = tool("recover_login", "emailAddress")
    tools = [reset, MODIFY]
    written = json.dumps(
        {
            "tool_calls": [
                {"name": "recover_login", "arguments": {"emailAddress": "C-186"}},
                {
                    "name": "modify_email",
                    "arguments": {"client_id": "C-186", "emailAddress": "yuki80@example.org"},
                },
            ]
        },
        separators=(",", ":"),
    )
    request = asked(
        "ssmith@inbox.dev can't log in, please reset. I'm customer C-186, use yuki80@example.org"
    )

    mended, pairs = restore_slot_kinds(written, request, tools, action_schema(tools, None))

    first = json.loads(mended)["tool_calls"][0]["arguments"]
    assert first == {"emailAddress": "ssmith@inbox.dev"}
    assert pairs == [("C-186", "ssmith@inbox.dev")]
