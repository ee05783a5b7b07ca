"""Customer-support concepts: orders, refunds, shipping, accounts, billing."""

from __future__ import annotations

import random
from typing import Any

from . import slots
from .concepts import Concept, Param, lines, words

_STATUSES = ("shipped", "processing", "delivered", "pending", "cancelled", "on hold")
_CARRIERS = ("UPS", "DHL", "FedEx", "USPS", "GLS")


def _order_result(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    total = round(rng.randint(10, 400) + rng.randint(0, 99) / 100, 2)
    return {
        "order_id": a["order"],
        "status": rng.choice(_STATUSES),
        "total": total,
        "items": rng.randint(1, 5),
    }


def _refund_result(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {
        "refund_id": f"R-{rng.randint(1000, 99999)}",
        "order_id": a["order"],
        "amount": a["amount"],
        "status": rng.choice(("approved", "pending review", "issued")),
    }


def _track_result(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {
        "order_id": a["order"],
        "carrier": rng.choice(_CARRIERS),
        "status": rng.choice(("in transit", "out for delivery", "delivered", "label created")),
        "eta": slots.date(rng).value,
    }


def _email_result(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"customer_id": a["customer"], "email": a["email"], "updated": True}


def _cancel_result(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"order_id": a["order"], "cancelled": True, "status": "cancelled"}


def _invoice_result(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {
        "invoice_id": a["invoice"],
        "amount_due": round(rng.randint(5, 900) + rng.randint(0, 99) / 100, 2),
        "status": rng.choice(("paid", "unpaid", "overdue")),
        "due_date": slots.date(rng).value,
    }


def _customer_result(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    first, last = rng.choice(slots._FIRST), rng.choice(slots._LAST)
    return {
        "customer_id": slots.customer_id(rng).value,
        "name": f"{first.capitalize()} {last.capitalize()}",
        "plan": rng.choice(("basic", "pro", "enterprise")),
    }


def _ticket_result(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"ticket_id": f"T-{rng.randint(100, 9999)}", "status": "open"}


def _address_result(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"order_id": a["order"], "updated": True, "city": a["address"]["city"]}


def _plan_result(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"customer_id": a["customer"], "plan": a["plan"], "effective": slots.date(rng).value}


def _reset_result(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"email": a["email"], "sent": True}


_ORDER = Param(
    "order",
    words("order_id orderId order_number id order_ref"),
    "string",
    slots.order_id,
    descs=lines("The order id|Order number|Identifier of the order|The order reference"),
)
_CUSTOMER = Param(
    "customer",
    words("customer_id customerId account_id client_id user_id"),
    "string",
    slots.customer_id,
    descs=lines("The customer id|Customer account id|Who the customer is"),
)
_EMAIL = Param(
    "email",
    words("email new_email email_address emailAddress address"),
    "string",
    slots.email,
    descs=lines("New email address|The email|Email to use"),
)

CONCEPTS: tuple[Concept, ...] = (
    Concept(
        "get_order",
        "support",
        words("get fetch lookup find retrieve show"),
        words("order order_details order_info purchase"),
        lines(
            "Look up an order|Get the status and details of an order|Fetch one order by id|"
            "Return order details|Look up an order: status, total and customer|Find an order|"
            "Order details: status, total, date"
        ),
        (_ORDER,),
        lines(
            "where is my order {order}?|what's the status of order {order}|"
            "can you check order {order} for me|any news on my order {order}?|"
            "I placed order {order} last week, what happened to it|look up order {order}|"
            "order {order} - status?|I want to know about my purchase {order}|"
            "has order {order} shipped yet?|check on {order} please|"
            "my order number is {order}, where is it|status of {order}?"
        ),
        _order_result,
        lines(
            "Order {order_id} is {status}. The total was {total}.|"
            "Your order {order_id} is currently {status} ({items} items, total {total}).|"
            "I checked order {order_id}: it is {status}.|"
            "Order {order_id}: status {status}, total {total}."
        ),
    ),
    Concept(
        "refund_order",
        "support",
        words("refund issue_refund create_refund refund_order process_refund"),
        words("order payment purchase"),
        lines(
            "Refund an order|Issue a refund for an order|Refund part or all of an order|"
            "Send money back to the customer|Create a refund"
        ),
        (
            _ORDER,
            Param(
                "amount",
                words("amount refund_amount value sum"),
                "number",
                slots.amount,
                descs=lines("Amount to refund|How much to refund|Refund amount in dollars"),
            ),
            Param(
                "reason",
                words("reason note refund_reason why"),
                "string",
                slots.reason,
                required=False,
                descs=lines(
                    "Why the refund is issued|Reason for the refund|Why the customer is refunded"
                ),
                mention=lines("because it {v}|reason: {v}|- {v}|since it was {v}|({v})"),
                enum_from=(
                    ("arrived damaged", "damaged"),
                    ("was damaged", "damaged"),
                    ("broken on arrival", "damaged"),
                    ("came late", "late"),
                    ("arrived late", "late"),
                    ("was delivered late", "late"),
                    ("wrong item", "wrong item"),
                    ("was the wrong item", "wrong item"),
                    ("not what I ordered", "wrong item"),
                    ("changed my mind", "other"),
                    ("ordered by mistake", "other"),
                ),
            ),
        ),
        lines(
            "please refund {amount} on order {order}|I need a refund of {amount} for order {order}|"
            "refund order {order}, {amount}|can I get {amount} back for {order}?|"
            "give the customer {amount} back on {order}|issue a {amount} refund to order {order}|"
            "order {order} should be refunded {amount}|refund {amount} for my purchase {order}"
        ),
        _refund_result,
        lines(
            "Refund {refund_id} of {amount} for order {order_id} is {status}.|"
            "Done: {amount} refunded on order {order_id} (refund {refund_id}, {status}).|"
            "I issued refund {refund_id} for {amount}; it is {status}."
        ),
    ),
    Concept(
        "track_shipment",
        "support",
        words("track get trace locate check follow"),
        words("shipment package delivery parcel shipping"),
        lines(
            "Track the shipment of an order|Where a package is now|Shipping status and ETA|"
            "Carrier tracking for an order|Where a parcel is: carrier, tracking number, status, ETA"
        ),
        (_ORDER,),
        lines(
            "track my package for order {order}|where is the parcel for {order}?|"
            "when will order {order} arrive|tracking info for {order} please|"
            "has the delivery for order {order} left the warehouse?|"
            "what's the ETA on {order}|follow the shipment of order {order}|"
            "is my package {order} out for delivery?"
        ),
        _track_result,
        lines(
            "Order {order_id} is {status} with {carrier}; expected {eta}.|"
            "Your package ({carrier}) is {status}. ETA: {eta}.|"
            "Shipment for {order_id}: {status}, arriving {eta}."
        ),
    ),
    Concept(
        "update_email",
        "support",
        words("update change set modify edit"),
        words("email customer_email email_address contact_email"),
        lines(
            "Change the email address on an account|Update a customer's email|"
            "Set a new contact email|Replace the account email"
        ),
        (_CUSTOMER, _EMAIL),
        lines(
            "change the email for customer {customer} to {email}|"
            "please update {customer}'s email to {email}|my new email is {email}, account {customer}|"
            "set email {email} on account {customer}|customer {customer} wants {email} as email|"
            "update email of {customer}: {email}|switch account {customer} over to {email}|"
            "I'm customer {customer}, use {email} from now on"
        ),
        _email_result,
        lines(
            "The email for customer {customer_id} is now {email}.|"
            "Updated: account {customer_id} will use {email}.|Done, {email} is set for {customer_id}."
        ),
    ),
    Concept(
        "cancel_order",
        "support",
        words("cancel void abort stop"),
        words("order purchase order_request"),
        lines("Cancel an order that has not shipped|Void an order|Stop an order before shipping"),
        (
            _ORDER,
            Param(
                "notify",
                words("notify notify_customer send_email email_customer"),
                "boolean",
                slots.flag,
                required=False,
                descs=lines("Email the customer about it|Send a notification"),
                mention=lines("and let the customer know|and notify them|and send a confirmation"),
                mention_false=lines("without notifying anyone|no need to email them|silently"),
            ),
        ),
        lines(
            "cancel order {order}|please cancel my order {order}|I don't want order {order} anymore|"
            "can you void {order}?|stop order {order} before it ships|kill order {order}|"
            "order {order} needs to be cancelled|cancel {order} for me"
        ),
        _cancel_result,
        lines(
            "Order {order_id} has been cancelled.|Done: {order_id} is now {status}.|"
            "I cancelled order {order_id}."
        ),
    ),
    Concept(
        "get_invoice",
        "support",
        words("get fetch download show lookup"),
        words("invoice bill billing_document invoice_details"),
        lines(
            "Get an invoice by id|Billing: fetch one invoice|Show the amount and status of an invoice"
        ),
        (
            Param(
                "invoice",
                words("invoice_id invoiceId invoice_number id"),
                "string",
                slots.invoice_id,
                descs=lines("The invoice id|Invoice number"),
            ),
        ),
        lines(
            "can you pull up invoice {invoice}|how much do I owe on {invoice}?|"
            "is invoice {invoice} paid|send me the details of invoice {invoice}|"
            "I need a copy of {invoice}|what's the status of bill {invoice}|"
            "check invoice {invoice} please|due date for {invoice}?"
        ),
        _invoice_result,
        lines(
            "Invoice {invoice_id} is {status}: {amount_due} due on {due_date}.|"
            "{invoice_id}: amount due {amount_due}, status {status}.|"
            "Your invoice {invoice_id} ({amount_due}) is {status}."
        ),
    ),
    Concept(
        "find_customer",
        "support",
        words("find lookup search get"),
        words("customer account customer_by_email user"),
        lines(
            "Find a customer account by email|Look up who owns an email|Search customers by email"
        ),
        (
            Param(
                "email",
                words("email email_address query contact"),
                "string",
                slots.email,
                descs=lines("Email to search for|The customer's email"),
            ),
        ),
        lines(
            "who is {email}?|find the account for {email}|look up customer {email}|"
            "is there an account with {email}|search for {email} in our customers|"
            "which customer uses {email}|pull up the account of {email}|"
            "do we know {email}?"
        ),
        _customer_result,
        lines(
            "{email} belongs to {name} (customer {customer_id}, plan {plan}).|"
            "Found {name}: id {customer_id}, {plan} plan.|That is customer {customer_id}, {name}."
        ),
    ),
    Concept(
        "update_address",
        "support",
        words("update change set fix"),
        words("shipping_address address delivery_address"),
        lines("Change where an order ships|Update the delivery address of an order"),
        (
            _ORDER,
            Param(
                "address",
                words("address new_address destination shipping_address"),
                "object",
                slots.address,
                schema=slots.address_schema,
                descs=lines("The new address|Where to ship"),
            ),
        ),
        lines(
            "ship order {order} to {address} instead|please change the address of {order} to {address}|"
            "new delivery address for {order}: {address}|I moved, send {order} to {address}|"
            "update shipping for order {order} - {address}|deliver {order} to {address} please|"
            "order {order} should go to {address}|can {order} be redirected to {address}?"
        ),
        _address_result,
        lines(
            "Order {order_id} will now ship to {city}.|Address updated for {order_id}.|"
            "Done, {order_id} is redirected to {city}."
        ),
    ),
    Concept(
        "change_plan",
        "support",
        words("change set update switch"),
        words("plan subscription tier billing_plan"),
        lines("Change a customer's subscription plan|Switch the billing plan of an account"),
        (
            _CUSTOMER,
            Param(
                "plan",
                words("plan new_plan tier level"),
                "enum",
                slots.pick(("basic", "pro", "enterprise", "free")),
                enum=("basic", "pro", "enterprise", "free"),
                descs=lines("Target plan|The new plan"),
            ),
        ),
        lines(
            "move customer {customer} to the {plan} plan|upgrade {customer} to {plan}|"
            "switch account {customer} to {plan} please|put {customer} on {plan}|"
            "I'm {customer} and I want the {plan} plan|change plan of {customer} to {plan}|"
            "{customer} should be on {plan} from now on|downgrade {customer} to {plan}"
        ),
        _plan_result,
        lines(
            "Customer {customer_id} is now on the {plan} plan from {effective}.|"
            "Plan changed to {plan} for {customer_id}.|Done: {customer_id} moves to {plan} on {effective}."
        ),
    ),
    Concept(
        "reset_password",
        "support",
        words("reset send recover"),
        words("password password_reset login credentials"),
        lines("Send a password reset link|Start a password reset for an email"),
        (_EMAIL,),
        lines(
            "I forgot my password, my email is {email}|reset the password for {email}|"
            "send a reset link to {email}|{email} can't log in, please reset|"
            "password reset for {email} please|help, locked out: {email}|"
            "please send {email} a new password link|can you reset {email}'s login"
        ),
        _reset_result,
        lines(
            "A password reset link was sent to {email}.|Sent: check {email} for the reset link.|"
            "Done, {email} will get a reset email shortly."
        ),
    ),
    Concept(
        "open_ticket",
        "support",
        words("create open file new submit"),
        words("ticket support_ticket case issue"),
        lines(
            "Open a support ticket|Create a ticket for a problem|File a case with a title and priority"
        ),
        (
            Param(
                "title",
                words("title subject summary headline"),
                "string",
                slots.title,
                descs=lines("Short title|What the ticket is about"),
            ),
            Param(
                "priority",
                words("priority urgency severity level"),
                "enum",
                slots.pick(("low", "medium", "high", "urgent")),
                enum=("low", "medium", "high", "urgent"),
                required=False,
                descs=lines("How urgent|Priority"),
                mention=lines("priority {v}|it's {v} priority|mark it {v}|({v})"),
            ),
        ),
        lines(
            'open a ticket titled "{title}"|create a case: "{title}"|please file "{title}"|'
            'new ticket "{title}"|log an issue called "{title}"|submit a ticket with subject "{title}"|'
            'can you open "{title}" as a ticket|ticket please: "{title}"'
        ),
        _ticket_result,
        lines(
            "Ticket {ticket_id} is {status}: {title}.|Opened {ticket_id} for you.|"
            "Created ticket {ticket_id} ({status})."
        ),
    ),
)
