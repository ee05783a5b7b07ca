"""Request phrasings that neither training nor the held-out split uses: the ``unseen`` split.

The held-out split (:func:`.concepts.split_pool`) holds back every fourth
phrasing of each pool, and every evaluation seed draws from those same few
phrasings. Rules written while reading a seed's misses therefore reach
phrasings that recur in every other seed, so a new seed is not a new phrasing.
The ``unseen`` split keeps the held-out tool names, descriptions and mentions,
but asks each request in words of its own, written once, before any model
output on them was read, and never to be read while rules are written: the
acceptance set of docs/models.md ("Evaluation").

Keys are :attr:`.concepts.Concept.key`; each template uses exactly the
concept's required slots.
"""

from __future__ import annotations

#: Per concept, the request templates of the ``unseen`` split.
UNSEEN_REQUESTS: dict[str, tuple[str, ...]] = {
    "get_order": (
        "what happened with order {order}?",
        "pull up the record for order {order}",
        "I'd like an update on {order}",
        "details for my order {order} please",
    ),
    "refund_order": (
        "I'd like {amount} refunded for order {order}",
        "please send {amount} back on {order}",
        "refund of {amount} needed for {order}",
        "return {amount} to the customer for order {order}",
    ),
    "track_shipment": (
        "where's the package for {order} right now?",
        "has {order} been delivered yet?",
        "which carrier has order {order} and when does it arrive",
        "any idea when {order} will show up at my door?",
    ),
    "update_email": (
        "customer {customer} has a new address: {email}",
        "replace the email on {customer} with {email}",
        "please use {email} for account {customer} from now on",
        "{customer} changed their email to {email}",
    ),
    "cancel_order": (
        "please call off order {order}",
        "I changed my mind, cancel {order}",
        "stop {order}, I don't need it",
        "order {order} should not go out, cancel it",
    ),
    "get_invoice": (
        "what do I owe on invoice {invoice}?",
        "show me bill {invoice}",
        "has {invoice} been paid yet?",
        "open invoice {invoice} for me",
    ),
    "find_customer": (
        "look for a customer with the email {email}",
        "which account belongs to {email}?",
        "find {email} among our customers",
        "is {email} one of our customers?",
    ),
    "update_address": (
        "{order} has the wrong destination, use {address}",
        "redirect {order}: the right place is {address}",
        "please deliver order {order} at {address} instead",
        "I've relocated, {order} belongs at {address}",
    ),
    "change_plan": (
        "switch {customer} to the {plan} tier",
        "{customer} wants the {plan} plan",
        "please upgrade or downgrade {customer} to {plan}",
        "{customer} asked to go on {plan}",
    ),
    "reset_password": (
        "{email} needs a new password",
        "{email} is locked out of their account",
        "help, I can't sign in, my email is {email}",
        "the login for {email} stopped working, reset it",
    ),
    "open_ticket": (
        'create a support ticket: "{title}"',
        'file a ticket called "{title}"',
        'raise a ticket about "{title}"',
        'I want a ticket for "{title}"',
    ),
    "restart_service": (
        "give {service} on {host} a restart",
        "{service} on {host} needs a restart",
        "the {service} process on {host} has to be restarted",
        "kick {service} on {host}, it's stuck",
    ),
    "check_disk": (
        "are we low on disk on {host}?",
        "what's the free space on {host}",
        "check storage on {host}",
        "how full is the disk on {host}?",
    ),
    "service_status": (
        "is {service} alive on {host}?",
        "does {service} look healthy on {host}?",
        "what's the state of {service} on {host}",
        "give me a health report for {service} on {host}",
    ),
    "deploy": (
        "{env} should run {service} {version}",
        "upgrade {service} on {env} to {version}",
        "release {service} {version} into {env}",
        "get {service} {version} live in {env}",
    ),
    "tail_logs": (
        "dump the recent {service} output on {host}",
        "what is {service} logging on {host}?",
        "fetch the log file of {service} from {host}",
        "I need to see the {service} log on {host}",
    ),
    "open_incident": (
        '"{title}" is an incident, {severity}',
        'page someone, {severity}: "{title}"',
        'start a {severity} incident for "{title}"',
        'we are down: "{title}", treat it as {severity}',
    ),
    "grant_access": (
        "make {user} a {role}",
        "add {user} with the {role} role",
        "{user} should get {role} permissions",
        "promote {user} to {role}",
    ),
    "disable_user": (
        "shut off the access of {user}",
        "{user} has left, block their login",
        "turn off access for {user}",
        "deactivate {user} please",
    ),
    "reboot_hosts": (
        "the servers {hosts} need rebooting",
        "please reboot these hosts: {hosts}",
        "cycle the power on {hosts}",
        "{hosts} have to be rebooted",
    ),
    "scale_service": (
        "run {service} with {replicas} replicas",
        "increase {service} to {replicas} instances",
        "set the replica count of {service} to {replicas}",
        "I want {replicas} copies of {service} running",
    ),
    "weather": (
        "weather in {city} today?",
        "what's the temperature in {city}?",
        "what's it like outside in {city}",
        "tell me the forecast for {city}",
    ),
    "search_docs": (
        "any guides on {query}?",
        "is there documentation on {query}?",
        "search our help pages for {query}",
        "what do the docs say about {query}",
    ),
    "send_message": (
        'drop {to} a line: "{body}"',
        'forward "{body}" to {to}',
        'send a note to {to} with "{body}"',
        'pass this on to {to}: "{body}"',
    ),
    "set_reminder": (
        'make sure I remember "{text}" on {date}',
        'on {date} I need to remember "{text}"',
        'put "{text}" in my reminders for {date}',
        'nudge me about "{text}" on {date}',
    ),
}
