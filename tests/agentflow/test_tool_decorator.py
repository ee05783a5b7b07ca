"""``@tool``: schemas from signatures, descriptions from docstrings, sync and async calls."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ValidationError

from agentflow import RunContext, Tool, ToolDefinitionError, tool
from agentflow.tool import parse_docstring


class Address(BaseModel):
    street: str
    city: str


def test_schema_and_descriptions_from_signature_and_google_docstring() -> None:
    @tool
    def refund_order(
        order_id: str, amount: float, reason: Literal["damaged", "late"] = "late"
    ) -> dict:
        """Refund part or all of an order.

        Args:
            order_id: The order number, e.g. 58213.
            amount: Amount in euros
                (may be partial).
            reason: Why the customer wants a refund.
        """
        return {}

    assert isinstance(refund_order, Tool)
    assert refund_order.name == "refund_order"
    assert refund_order.description == "Refund part or all of an order."
    params = refund_order.parameters
    assert params["required"] == ["order_id", "amount"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["order_id"] == {"type": "string", "description": "The order number, e.g. 58213."}
    assert props["amount"]["description"] == "Amount in euros (may be partial)."
    assert props["reason"]["enum"] == ["damaged", "late"]
    assert "title" not in params and "title" not in props["amount"]


def test_sphinx_docstring_and_property_named_title_survives() -> None:
    @tool
    def create_ticket(title: str, priority: int = 3) -> str:
        """Open a ticket.

        :param title: One-line summary.
        :param priority: 1 (urgent) to 5.
        """
        return title

    props = create_ticket.parameters["properties"]
    assert set(props) == {"title", "priority"}
    assert props["title"]["description"] == "One-line summary."
    assert props["priority"]["default"] == 3


def test_options_override_name_description_and_set_timeout() -> None:
    @tool(name="lookup", description="Find things.", timeout=2.5)
    async def find(q: str) -> str:
        return q

    assert (find.name, find.description, find.timeout, find.is_async) == (
        "lookup",
        "Find things.",
        2.5,
        True,
    )


@pytest.mark.anyio
async def test_invoke_validates_and_runs_sync_in_thread_and_async_inline() -> None:
    @tool
    def add(a: int, b: int = 1) -> int:
        return a + b

    @tool
    async def where(address: Address) -> str:
        return f"{address.street}, {address.city}"

    assert await add.invoke({"a": "2"}) == 3  # lax validation coerces numeric strings
    assert (
        await where.invoke({"address": {"street": "1 Main St", "city": "Lyon"}})
        == "1 Main St, Lyon"
    )
    assert "$defs" in where.parameters
    with pytest.raises(ValidationError):
        await add.invoke({"a": "two"})
    with pytest.raises(ValidationError):
        await add.invoke({"a": 1, "c": 2})  # unknown argument
    assert add(4, b=5) == 9  # the tool is still callable directly


@pytest.mark.anyio
async def test_run_context_parameter_is_injected_and_not_in_schema() -> None:
    @tool
    def whoami(ctx: RunContext[dict], field: str) -> str:
        return str(ctx.deps[field])

    assert whoami.takes_context
    assert list(whoami.parameters["properties"]) == ["field"]
    ctx = RunContext(run_id="r", agent_name="a", step=0, deps={"user": "ada"})
    assert await whoami.invoke({"field": "user"}, ctx) == "ada"


def test_bad_definitions_name_the_problem() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(ToolDefinitionError, match="parameter 'x' needs a type annotation"):
        tool(untyped)

    def star(*items: int) -> int:
        return 0

    with pytest.raises(ToolDefinitionError, match=r"\*args/\*\*kwargs parameter 'items'"):
        tool(star)
    with pytest.raises(ToolDefinitionError, match="tool name 'bad name'"):
        tool(name="bad name")(lambda: 1)
    with pytest.raises(ToolDefinitionError, match="timeout must be positive"):
        tool(timeout=0)(untyped)

    def late_ctx(x: int, ctx: RunContext[None]) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match="RunContext parameter must come first"):
        tool(late_ctx)


def test_parse_docstring_without_sections() -> None:
    assert parse_docstring("  Just a line.\n\n  More text. ") == ("Just a line. More text.", {})
    assert parse_docstring(None) == ("", {})
