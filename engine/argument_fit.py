"""Which tools a request's values can fill: a prior for tool choice from the arguments.

The words of a request can point a small model at a tool that cannot take what
the request gives it: "do we know omar@initech.io?" called ``find_order`` with
the e-mail as its order id, "any news on my order ord_45547?" ``refund_order``
with a made-up amount. The values say what kind of call is meant, whatever the
phrasing: an e-mail address goes to a tool that takes one, a number to a tool
with a numeric parameter.

Each tool counts its *misfits* against the values of one clause of the request
(:func:`~.call_coverage.clauses`; of the clauses that hold values, the one it
fits best counts, since a request of two clauses serves two calls — "good
morning." or "asap please" holds none and counts for no tool):

- a required numeric parameter (``integer``/``number``, no ``enum``) with no
  number of the clause left for it;
- a required string parameter for an e-mail (its name or description says
  *email*, *mail*, *recipient* or *contact*) with no e-mail of the clause left
  for it, and likewise for a version (*version*, *release*, *build*, *tag*);
- an e-mail in the clause while the tool's name, description and parameters
  mention none, and likewise for a version;
- a clause whose values are all e-mails while the tool, which takes an e-mail,
  also requires a string named for an id or an account ("is there an account
  with a@b.io" gives no ``client_id`` for an e-mail change to take besides the
  address);
- an e-mail and an account id in the clause ("I'm customer 628, use
  noah42@corp.org from now on") while the tool, which takes an e-mail, has no
  other string parameter to hold the id: a look-up by e-mail or a password
  reset is not what gives an account a new address;
- a count in the clause ("we need 43 etcd pods", "just 349 lines": a number,
  not one naming a thing, before a plural noun, a word between them allowed)
  while the tool has no numeric parameter and no array parameter to take it;
- a clause naming a thing (an order, an invoice, a shipment: "I want to know
  about my purchase 588450", "tracking info for ORD-15237") that the tool, about
  another, does not serve (:mod:`.asked_objects`);
- a clause whose values are members of a listed tool's ``enum`` and quoted
  text ('log a sev1 for "Mobile app crashes"') while the tool's enums hold
  none of those members: the log reader has no slot for a severity;
- a postal address in the clause ("can 2470 be redirected to 40 Cedar Ave,
  Berlin 98686?") while the tool's name, description and parameter names say
  no *address*, *street* or *destination*;
- a list of ``MIN_LIST_ITEMS`` values or more in the clause ("restart hosts
  gw-eu, edge-prod4 & mail-prod", "db20 & proxy-qa"; the value-like items of a
  :func:`~.listed_values.request_lists` list, so that "customer C-9520, use
  ..." is none) while the tool has no array parameter to hold it: a tool
  restarting one service on one machine is not what a list of hosts asks for.

Descriptions are read without their example values ("Which machine, e.g.
mail-dev16" is not about mail), and a number the request names a thing with
("order 962414", "invoice #5512") is an id, not a number a numeric parameter
could take: "order 962414 came late, I want my money back" gives a refund no
amount.

The bonus on the tool-name choice (``ConstraintSession.prefer``) is ``-weight``
per misfit; a tool that fits gets none, and the model still decides between the
tools that fit. Only the kinds of values whose slot a tool's schema or words say
plainly are read: a host, an id or a name fits any string parameter.
docs/constraints.md ("Argument fit") has the measurements behind the default
weight.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence, Set
from typing import Any, Protocol

from .asked_changes import unasked_changes
from .asked_objects import asked_objects, serves_other_objects
from .call_coverage import clause_values, clauses
from .listed_values import request_lists
from .read_only_requests import changing_tools
from .tool_relevance import (
    QUOTED,
    as_bonuses,
    enum_members,
    is_value_like,
    request_words,
    same_word,
    schema_nodes,
    words,
)

#: Log-space penalty per misfit: ``EmbeddedModel``'s default (``agentflow eval
#: --argument-fit`` is off unless given).
DEFAULT_WEIGHT = 16.0

#: The kinds of value whose slot a tool's words say plainly, with those words.
KIND_WORDS: dict[str, tuple[str, ...]] = {
    "email": ("email", "mail", "recipient", "contact"),
    "version": ("version", "release", "build", "tag"),
}

#: The fewest value-like items of a list that only a tool with an array parameter
#: can take ("db20 & proxy-qa"; a service and its host are no list: "restart nginx
#: on web-1").
MIN_LIST_ITEMS = 2

#: The words that name a parameter for an account (an id the request must give).
ACCOUNT_WORDS = frozenset({"account", "customer", "client", "user", "login", "username"})
#: A parameter named for an id: ``id``, ``order_id``, ``customerId``.
ID_NAME = re.compile(r"(?:^|_|-|[a-z])(?:id|Id|ID)$")

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
_VERSION = re.compile(r"^(?:v\d+(?:\.\d+)+|\d+\.\d+\.\d+(?:\.\d+)*)$")
_NUMBER = re.compile(r"^[$€£#]?-?\d+(?:[.,]\d+)?%?$")
#: A number after a word for a thing it identifies: an id, not an amount or a count.
#: An account's id, named as one: "customer C-9520", "account 4637", "client #12".
_ACCOUNT_ID = re.compile(
    r"\b(?:customer|account|client)\s+(?:id\s+|number\s+|no\.?\s*)?#?[\w-]*\d[\w-]*(?![\w.@-])",
    re.IGNORECASE,
)
#: A count: a number before a plural noun, one word between them allowed ("43 etcd
#: pods", "349 lines"), not inside an id, an amount or a date.
_COUNT = re.compile(r"(?<![\w.$€£#-])(\d+)\s+(?:[a-z][\w-]*\s+)?([a-z]{2,}s)\b(?![.-]\w)", re.I)
#: Words ending in s that are no plural nouns.
_NOT_PLURAL_TEXT = """is was has its this us yes pls thanks plus as does his hers ours yours
    less address access process status always sometimes miss news"""
_NOT_PLURAL = frozenset(_NOT_PLURAL_TEXT.split())
_NAMED_NUMBER = re.compile(
    r"\b(?:order|purchase|invoice|customer|account|ticket|case|parcel|package|shipment)"
    r"\s+(?:number\s+|no\.?\s*)?(#?\d+)\b",
    re.IGNORECASE,
)


#: A postal address: a number and one to four words of a street, a comma, a town
#: (one to three words) and a postcode of four to six digits.
_ADDRESS = re.compile(
    r"(?<![\w.-])\d{1,5}\s+[A-Za-z][\w.'-]*(?:\s+[A-Za-z][\w.'-]*){0,3},\s*"
    r"[A-Z][\w.'-]*(?:\s+[A-Z][\w.'-]*){0,2}\s+\d{4,6}\b"
)
#: The words that say a tool takes a postal address.
ADDRESS_WORDS = frozenset({"address", "street", "destination"})


class ToolWithSchema(Protocol):
    """What argument fit reads of a tool (``ToolSpec`` has all three)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]: ...


def value_kind(value: str) -> str:
    """``"email"``, ``"version"`` (``v1.2``, ``5.2.10``), ``"number"`` (``40``,
    ``$18.50``, ``#86669``) or ``"text"`` (anything else: an id, a host, a name)."""
    if _EMAIL.match(value):
        return "email"
    if _VERSION.match(value):
        return "version"
    if _NUMBER.match(value):
        return "number"
    return "text"


def misfits(
    tool: ToolWithSchema,
    values: Sequence[str],
    ids: Set[str] = frozenset(),
    listed: int = 0,
    counted: bool = False,
    account: bool = False,
    objects: Set[str] = frozenset(),
    members: Set[str] = frozenset(),
    address: bool = False,
) -> int:
    """How many of the rules in this module's docstring ``tool`` breaks against
    ``values`` (the values of one clause); those in ``ids`` are ids whatever
    their shape, ``listed`` is the length of the longest list the clause gives,
    ``counted`` says whether it gives a count (:func:`gives_count`),
    ``account`` whether it names an account's id (:func:`names_account`) and
    ``objects`` are the kinds of thing it names (:mod:`.asked_objects`) and
    ``members`` its values that some listed tool's ``enum`` holds (lower-cased);
    ``address`` says whether it gives a postal address (:func:`gives_address`)."""
    properties = tool.parameters.get("properties") or {}
    required = tool.parameters.get("required") or []
    kinds = ["text" if v in ids else value_kind(v) for v in values]
    left = {kind: kinds.count(kind) for kind in ("number", *KIND_WORDS)}
    count = 0
    for name in required:
        schema = properties.get(name)
        if not isinstance(schema, Mapping) or "enum" in schema:
            continue
        wanted = "number" if schema.get("type") in ("integer", "number") else kind_of(name, schema)
        if wanted is None:
            continue
        if left[wanted]:
            left[wanted] -= 1
        else:
            count += 1
    for kind in KIND_WORDS:
        if kind in kinds and not _mentions(tool, properties, kind):
            count += 1
    if (
        kinds
        and set(kinds) == {"email"}
        and _mentions(tool, properties, "email")
        and _plain_strings(required, properties)
    ):
        count += 1
    if listed >= MIN_LIST_ITEMS and not any(_takes_list(s) for s in properties.values()):
        count += 1
    if counted and not any(_takes_count(s) for s in properties.values()):
        count += 1
    if (
        account
        and kinds.count("email") == 1
        and _mentions(tool, properties, "email")
        and not _other_strings(properties)
    ):
        count += 1
    if serves_other_objects(tool, objects):
        count += 1
    if members and members - enum_members(tool.parameters):
        count += 1
    if address and not _takes_address(tool):
        count += 1
    return count


def argument_fit(request: str, tools: Sequence[ToolWithSchema]) -> dict[str, float]:
    """Each tool's fit to ``request``: minus its fewest :func:`misfits` over the
    request's clauses that hold values (0: some clause's values fit it; with no
    values anywhere, a tool that needs some misfits), one more for a tool that
    changes state when the request only asks (:mod:`.read_only_requests`), and one
    more for a tool making a kind of change the request does not name
    (:mod:`.asked_changes`)."""
    lists = request_lists(request)
    ids = named_numbers(request)
    listed = set().union(*(enum_members(t.parameters) for t in tools))
    parts = [
        (
            v,
            _longest_list(c, lists),
            gives_count(c, ids),
            names_account(c),
            asked_objects(c),
            _named_members(c, v, listed),
            gives_address(c),
        )
        for c in clauses(request)
        if (v := clause_values(c))
    ]
    changing = changing_tools(request, tools)
    unasked = unasked_changes(request, tools)
    return {
        t.name: float(
            -min(
                misfits(t, v, ids, longest, counted, account, objects, members, address)
                for v, longest, counted, account, objects, members, address in parts
                or [([], 0, False, False, frozenset(), frozenset(), False)]
            )
            - (t.name in changing)
            - (t.name in unasked)
        )
        for t in tools
    }


def gives_address(clause: str) -> bool:
    """True when ``clause`` gives a postal address outside quotes: a number and a
    street's words, a comma, a town and a postcode ("40 Cedar Ave, Berlin 98686")."""
    return _ADDRESS.search(QUOTED.sub(" ", clause)) is not None


def _takes_address(tool: ToolWithSchema) -> bool:
    """True when ``tool``'s name, description or a parameter's name anywhere in its
    schema says *address*, *street* or *destination*."""
    said = set(words(tool.name)) | set(words(tool.description or ""))
    for node in schema_nodes(tool.parameters):
        for name in node.get("properties") or {}:
            said |= set(words(name))
    return bool(said & ADDRESS_WORDS)


def _named_members(clause: str, values: Sequence[str], listed: Set[str]) -> set[str]:
    """The ``values`` of ``clause`` that are members of a listed ``enum`` (``listed``,
    lower-cased), where every other value is quoted text ("log a sev1 for "Mobile
    app crashes""): a clause with more values may hold two requests, whose member
    one tool takes and whose other values another."""
    quoted = {q[1:-1] for q in QUOTED.findall(clause)}
    named = {v.lower() for v in values} & listed
    if all(v.lower() in named or v in quoted for v in values):
        return named
    return set()


def _plain_strings(required: Sequence[str], properties: Mapping[str, Any]) -> bool:
    """True when one of the ``required`` parameters is a string named for an id or an
    account (``client_id``, ``customerId``, ``account``, ``user``): a value the
    request must give, where free text (a message's ``body``) the model may write."""
    return any(
        _plain_string(name, properties.get(name))
        and (ID_NAME.search(name) is not None or bool(ACCOUNT_WORDS & set(words(name))))
        for name in required
    )


def _other_strings(properties: Mapping[str, Any]) -> bool:
    """True when a parameter of ``properties`` takes a plain string that is not for an
    e-mail or a version (not an ``enum`` either): a slot an account id could go to."""
    return any(_plain_string(name, schema) for name, schema in properties.items())


def _plain_string(name: str, schema: Any) -> bool:
    """True for a string parameter that is no ``enum`` and not named for a kind of value."""
    return (
        isinstance(schema, Mapping)
        and schema.get("type", "string") == "string"
        and "enum" not in schema
        and kind_of(name, schema) is None
    )


def _longest_list(clause: str, lists: Sequence[Sequence[str]]) -> int:
    """The most value-like items of one of ``lists`` that ``clause`` gives whole."""
    return max(
        (
            sum(is_value_like(i) for i in items)
            for items in lists
            if all(i in clause for i in items)
        ),
        default=0,
    )


def gives_count(clause: str, ids: Set[str] = frozenset()) -> bool:
    """True when ``clause`` gives a count outside quotes: a number (none of ``ids``,
    the numbers naming a thing) before a plural noun, a word between them allowed."""
    return any(
        m.group(2).lower() not in _NOT_PLURAL and m.group(1) not in ids
        for m in _COUNT.finditer(QUOTED.sub(" ", clause))
    )


def names_account(clause: str) -> bool:
    """True when ``clause`` names an account's id ("customer C-9520", "account 4637")."""
    return _ACCOUNT_ID.search(QUOTED.sub(" ", clause)) is not None


def _takes_count(schema: Any) -> bool:
    """True for a parameter schema that takes a number or a list (alone or as a branch)."""
    return _takes(schema, {"integer", "number", "array"})


def _takes_list(schema: Any) -> bool:
    """True for a parameter schema that takes an array (alone or as one branch)."""
    return _takes(schema, {"array"})


def _takes(schema: Any, types: Set[str]) -> bool:
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    if (kind in types) if isinstance(kind, str) else bool(types & set(kind or ())):
        return True
    return any(_takes(b, types) for key in ("anyOf", "oneOf") for b in schema.get(key, ()))


def named_numbers(request: str) -> set[str]:
    """The numbers ``request`` names a thing with ("order 962414", "invoice #5512")."""
    return set(_NAMED_NUMBER.findall(request))


def fit_bonuses(
    request: str, tools: Sequence[ToolWithSchema], weight: float = DEFAULT_WEIGHT
) -> dict[str, float]:
    """``weight`` × :func:`argument_fit` as log-space bonuses (0 or less) for the
    tool-name choice; an empty dict when every tool fits, fewer than two are
    listed or ``weight`` is 0."""
    if weight == 0 or len(tools) < 2:
        return {}
    return as_bonuses(argument_fit(request, tools), weight)


def kind_of(name: str, schema: Mapping[str, Any]) -> str | None:
    """The kind of value (a key of :data:`KIND_WORDS`) a string parameter ``name``
    is named or described for, if any."""
    if schema.get("type", "string") != "string":
        return None
    return next(
        (kind for kind in KIND_WORDS if _says(name, schema.get("description") or "", kind)), None
    )


def _mentions(tool: ToolWithSchema, properties: Mapping[str, Any], kind: str) -> bool:
    if _says(tool.name, tool.description or "", kind):
        return True
    return any(
        isinstance(schema, Mapping) and kind_of(name, schema) == kind
        for name, schema in properties.items()
    )


def _says(identifier: str, prose: str, kind: str) -> bool:
    """True when the words of ``identifier`` (split at ``_``, ``-`` and case changes)
    or of ``prose`` (its example values left out) include one of ``kind``'s."""
    said = words(identifier) + request_words(prose)
    return any(same_word(w, k) for w in said for k in KIND_WORDS[kind])
