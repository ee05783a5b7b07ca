"""The thing a request is about: a tool about another thing is not it.

"I want to know about my purchase 588450" called ``show_invoice_details``,
"tracking info for ORD-15237 please" ``find_order``, "is my package 34744 out
for delivery?" an order look-up: each request names the thing it is about, and
the model picked a tool about another. A support desk's things are few and
plain to tell apart by their nouns (:data:`OBJECT_KINDS`):

- *order*: order, purchase;
- *invoice*: invoice, bill;
- *shipment*: shipment, package, parcel, tracking.

A clause names a kind by one of these nouns outside quotes and before any reason
it gives ("because the package was empty" is why, not what), its plural or a
swap of two of its letters included ("odrer", "Tracknig"; "ship" and "billing"
say what is done, not to what), or by an id led by one's first letters
("INV-2026-5207", "ord_51292"). A tool is about the kinds its
name, description and parameters (names and descriptions, example values left
out) name, and also shows a shipment by *shipping*, *delivery*, *carrier* or
*ships*: a request saying "delivery address" or "update shipping" asks where an
order goes, which an order's tool serves, so those words name no shipment in a
request, while a tool they describe is about one.

Where a clause names at least one kind, a listed tool about some kind that does
not serve one of them counts one misfit in :mod:`.argument_fit`: "tracking info
for ORD-15237" names an order and its shipment, which an order's look-up does not
serve. An order's request can be
served by its shipment's tool ("where is my order 7731?" asks for the tracking),
so a shipment tool serves an order as well (:data:`SERVED_BY`); the other way
round it does not. A tool about no kind (a restart, a look-up by e-mail, a tool
named in made-up words) is not touched, and neither is anything when the clause
names no kind ("status of ST8160?"). docs/constraints.md ("Argument fit") has the
measurements.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Set
from typing import Any

from .reason_values import REASON_MARKER
from .tool_relevance import (
    QUOTED,
    DescribedTool,
    identifier_words,
    is_value_like,
    letters_swapped,
    request_words,
    same_word,
)

_KINDS_TEXT = {
    "order": "order purchase",
    "invoice": "invoice bill",
    "shipment": "shipment package parcel tracking",
}
#: The things a support request is about, and the nouns that name each.
OBJECT_KINDS: dict[str, frozenset[str]] = {
    kind: frozenset(nouns.split()) for kind, nouns in _KINDS_TEXT.items()
}
#: Words that show a tool is about a shipment, and in a request only where an order goes.
SHIPPING_WORDS = frozenset({"shipping", "delivery", "carrier", "ships"})
#: The kinds of tool that can serve a request about each kind.
SERVED_BY: dict[str, frozenset[str]] = {
    "order": frozenset({"order", "shipment"}),
    "invoice": frozenset({"invoice"}),
    "shipment": frozenset({"shipment"}),
}
#: The fewest letters of an id's head that name a kind ("INV-", "ord_").
MIN_ID_HEAD = 3
_ID_HEAD = re.compile(r"^#?([A-Za-z]+)[-_#]?\d[\d-]*[?.,;:!]*$")


def tool_objects(tool: DescribedTool) -> set[str]:
    """The kinds of thing ``tool`` is about, by the words of its name, its description
    and its parameters (their names and descriptions)."""
    said = identifier_words(tool.name) + request_words(tool.description or "")
    for name, schema in _properties(tool).items():
        said += identifier_words(name)
        if isinstance(schema, Mapping):
            said += request_words(str(schema.get("description") or ""))
    found = _kinds(set(said))
    if SHIPPING_WORDS.intersection(said):
        found.add("shipment")
    return found


def asked_objects(clause: str) -> set[str]:
    """The kinds of thing ``clause`` names: by a noun outside quotes and before any
    reason, or by an id's head."""
    said = REASON_MARKER.split(QUOTED.sub(" ", clause), maxsplit=1)[0]
    found = _kinds(request_words(said), strict=True)
    for token in said.split():
        head = _ID_HEAD.match(token) if is_value_like(token) else None
        if head and len(head.group(1)) >= MIN_ID_HEAD:
            found |= {
                kind
                for kind, nouns in OBJECT_KINDS.items()
                if any(noun.startswith(head.group(1).lower()) for noun in nouns)
            }
    return found


def serves_other_objects(tool: DescribedTool, asked: Set[str]) -> bool:
    """True when ``tool`` is about some kind of thing and one of the kinds in ``asked``
    (the kinds one clause names) is none it serves; False when the clause names none."""
    kinds = tool_objects(tool) if asked else set()
    return bool(kinds) and any(not kinds & SERVED_BY[kind] for kind in asked)


def _properties(tool: DescribedTool) -> Mapping[str, Any]:
    parameters = getattr(tool, "parameters", None)
    if not isinstance(parameters, Mapping):
        return {}
    properties = parameters.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _kinds(words: Iterable[str], strict: bool = False) -> set[str]:
    """The kinds ``words`` name: by any inflection of a noun, or where ``strict`` (a
    request's words) by the noun, its plural or a swap of two of its letters only
    ("ship" and "billing" say what is done, not what to)."""
    found: set[str] = set()
    for word in words:
        word = word.lower()
        for kind, nouns in OBJECT_KINDS.items():
            if any(_names(word, noun, strict) for noun in nouns):
                found.add(kind)
    return found


def _names(word: str, noun: str, strict: bool) -> bool:
    if not strict:
        return same_word(word, noun)
    return word in (noun, noun + "s") or letters_swapped(word, noun)
