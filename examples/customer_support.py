"""Customer support: orders, refunds and shipping on a real SQLite database.

The example creates the shop's database (customers, orders, shipments, refunds)
and gives an agent tools that read and change it. The model decides which tools
to call; nothing in this file answers for it.

    python examples/customer_support.py "Where is my order 58213?"
    python examples/customer_support.py --model test "Refund order 58213"
    python examples/customer_support.py --db shop.db --model path/to/checkpoint "..."

``agentflow demo`` runs it through ``build_agent``.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import date
from pathlib import Path
from typing import Any, Literal

import anyio

from agentflow import Agent, Model, RunResult, TestModel, Tool, tool

INSTRUCTIONS = (
    "You are the customer-support agent of an online shop. Use the tools to look up "
    "orders and shipments, issue refunds and update contact details; never invent "
    "order data. Answer the customer briefly once you have what you need."
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS customers (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
    id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customers(id),
    status TEXT NOT NULL, total REAL NOT NULL, placed TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS shipments (
    order_id TEXT PRIMARY KEY REFERENCES orders(id), carrier TEXT NOT NULL,
    tracking TEXT NOT NULL, status TEXT NOT NULL, eta TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS refunds (
    id INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL REFERENCES orders(id),
    amount REAL NOT NULL, reason TEXT NOT NULL, created TEXT NOT NULL
);
"""

CUSTOMERS = [
    ("C100", "Ada Lovelace", "ada@example.com"),
    ("C101", "Alan Turing", "alan@example.com"),
    ("C102", "Grace Hopper", "grace@example.com"),
]
ORDERS = [
    ("58213", "C100", "shipped", 129.90, "2026-11-20"),
    ("58214", "C101", "processing", 45.00, "2026-11-28"),
    ("58215", "C102", "delivered", 310.50, "2026-11-02"),
    ("58216", "C100", "cancelled", 12.00, "2026-10-15"),
]
SHIPMENTS = [
    ("58213", "DHL", "JD014600003828", "in transit", "2026-12-04"),
    ("58215", "UPS", "1Z999AA10123456784", "delivered", "2026-11-06"),
]


def create_database(path: str | Path) -> Path:
    """Create the shop database at ``path`` (tables and sample rows); existing rows are kept."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path)) as db, db:
        db.executescript(SCHEMA)
        db.executemany("INSERT OR IGNORE INTO customers VALUES (?, ?, ?)", CUSTOMERS)
        db.executemany("INSERT OR IGNORE INTO orders VALUES (?, ?, ?, ?, ?)", ORDERS)
        db.executemany("INSERT OR IGNORE INTO shipments VALUES (?, ?, ?, ?, ?)", SHIPMENTS)
    return path


class ShopError(ValueError):
    """A request the shop cannot honour; the agent sees the message as the tool's error."""


def build_tools(db_path: str | Path) -> list[Tool]:
    """The agent's tools, bound to the database at ``db_path``."""

    @contextmanager
    def connect() -> Iterator[sqlite3.Connection]:
        with closing(sqlite3.connect(db_path)) as db, db:
            db.row_factory = sqlite3.Row
            yield db

    def order_row(db: sqlite3.Connection, order_id: str) -> sqlite3.Row:
        # Customers write "#58213" or " 58213": the number is the id.
        key = order_id.strip().removeprefix("#").strip()
        row = db.execute("SELECT * FROM orders WHERE id = ?", (key,)).fetchone()
        if row is None:
            raise ShopError(f"order {order_id} does not exist")
        return row

    @tool
    def get_order(order_id: str) -> dict[str, Any]:
        """Look up an order: status, total, date and the customer.

        Args:
            order_id: The order number, e.g. 58213.
        """
        with connect() as db:
            order = order_row(db, order_id)
            refunded = db.execute(
                "SELECT COALESCE(SUM(amount), 0) FROM refunds WHERE order_id = ?", (order["id"],)
            ).fetchone()[0]
            customer = db.execute(
                "SELECT name, email FROM customers WHERE id = ?", (order["customer_id"],)
            ).fetchone()
        return {
            "order_id": order["id"],
            "status": order["status"],
            "total": order["total"],
            "refunded": refunded,
            "placed": order["placed"],
            "customer_id": order["customer_id"],
            "customer": customer["name"],
            "email": customer["email"],
        }

    @tool
    def track_shipment(order_id: str) -> dict[str, Any]:
        """Where an order's parcel is: carrier, tracking number, status, expected delivery.

        Args:
            order_id: The order number.
        """
        with connect() as db:
            order = order_row(db, order_id)
            ship = db.execute(
                "SELECT * FROM shipments WHERE order_id = ?", (order["id"],)
            ).fetchone()
        if ship is None:
            return {
                "order_id": order["id"],
                "status": f"not shipped yet (order is {order['status']})",
            }
        return {
            "order_id": order["id"],
            "carrier": ship["carrier"],
            "tracking": ship["tracking"],
            "status": ship["status"],
            "eta": ship["eta"],
        }

    @tool
    def refund_order(
        order_id: str, amount: float, reason: Literal["damaged", "late", "wrong item", "other"]
    ) -> dict[str, Any]:
        """Refund part or all of an order to the customer's card.

        Args:
            order_id: The order number.
            amount: Amount to refund, in euros; at most what is left after earlier refunds.
            reason: Why the customer is refunded.
        """
        if amount <= 0:
            raise ShopError(f"refund amount must be positive, got {amount}")
        with connect() as db:
            order = order_row(db, order_id)
            if order["status"] == "cancelled":
                raise ShopError(f"order {order_id} was cancelled; nothing was charged")
            refunded = db.execute(
                "SELECT COALESCE(SUM(amount), 0) FROM refunds WHERE order_id = ?", (order["id"],)
            ).fetchone()[0]
            left = round(order["total"] - refunded, 2)
            if amount > left:
                raise ShopError(f"order {order_id} has only {left:.2f} EUR left to refund")
            cur = db.execute(
                "INSERT INTO refunds (order_id, amount, reason, created) VALUES (?, ?, ?, ?)",
                (order["id"], amount, reason, date.today().isoformat()),
            )
        return {
            "refund_id": cur.lastrowid,
            "order_id": order["id"],
            "amount": amount,
            "left": left - amount,
        }

    @tool
    def update_email(customer_id: str, email: str) -> dict[str, str]:
        """Change a customer's e-mail address.

        Args:
            customer_id: The customer id, e.g. C100.
            email: The new address.
        """
        if "@" not in email or email.startswith("@") or email.endswith("@"):
            raise ShopError(f"{email!r} is not an e-mail address")
        with connect() as db:
            cur = db.execute("UPDATE customers SET email = ? WHERE id = ?", (email, customer_id))
            if cur.rowcount == 0:
                raise ShopError(f"customer {customer_id} does not exist")
        return {"customer_id": customer_id, "email": email}

    @tool
    def list_orders(customer_id: str) -> list[dict[str, Any]]:
        """A customer's orders, newest first.

        Args:
            customer_id: The customer id, e.g. C100.
        """
        with connect() as db:
            rows = db.execute(
                "SELECT id, status, total, placed FROM orders WHERE customer_id = ? ORDER BY placed DESC",
                (customer_id,),
            ).fetchall()
        return [dict(r) for r in rows]

    return [get_order, track_shipment, refund_order, update_email, list_orders]


def build_agent(db_path: str | Path, model: Model | str | None = None) -> Agent[None, str]:
    """The support agent on the database at ``db_path`` (created if missing).

    ``model``: a :class:`Model`, a spec (``"test"``, ``"hybrid"``, a checkpoint path) or
    None for the packaged embedded model.
    """
    create_database(db_path)
    if model == "test":
        model = TestModel(call_tools=["get_order", "track_shipment"])
    return Agent(
        "customer_support",
        INSTRUCTIONS,
        build_tools(db_path),
        model=model,
        max_steps=6,
        tool_timeout=10.0,
    )


async def run_demo(
    message: str, db_path: str | Path | None = None, model: Model | str | None = None
) -> RunResult[str]:
    """Run the agent on one customer message (on a temporary database unless ``db_path``)."""
    if db_path is not None:
        return await build_agent(db_path, model).run(message)
    with tempfile.TemporaryDirectory(prefix="agentflow-shop-") as tmp:
        return await build_agent(Path(tmp) / "shop.db", model).run(message)


def describe(result: RunResult[Any]) -> str:
    """The run's tool calls and final answer, as lines of text."""
    lines = []
    for step in result.steps:
        for call in step.tool_results:
            shown = call.error if call.error is not None else call.result
            lines.append(f"  step {step.index}: {call.name}({call.arguments}) -> {shown}")
    lines.append(f"answer: {result.output}")
    u = result.usage
    modes = ", ".join(f"{m}×{n}" for m, n in u.modes.items())
    lines.append(
        f"usage: {u.steps} steps, {u.total_tokens} tokens, {u.forward_passes} forward passes, "
        f"{u.model_seconds:.2f}s in the model ({modes})"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("message", nargs="?", default="Where is my order 58213?")
    parser.add_argument("--db", type=Path, default=None, help="SQLite file (default: a temp file)")
    parser.add_argument(
        "--model", default=None, help="'test', 'hybrid', a checkpoint path (default: embedded)"
    )
    args = parser.parse_args(argv)
    result = anyio.run(lambda: run_demo(args.message, args.db, args.model))
    print(f"customer: {args.message}")
    print(describe(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
