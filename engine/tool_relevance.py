"""Which tools a request is about, by the words they share: a prior for tool choice.

A small model rates a tool it has never seen by its name's surface form; the
request's own words often name the tool outright ("check sshd's *journal*" →
``show_journal``, "turn off *login* bdoe" → ``deactivate_login``). Each tool is
scored by the words of its name (``snake_case``, ``camelCase`` and ``kebab-case``
split) and description (half as much: prose, with generic verbs) that the
request also uses, each word weighted by how few of the listed tools use it (an
inverse document frequency over the tool list, scaled to 1 for a word only one
tool uses so that a long tool list does not make the words outweigh the model:
"order" in every support tool's description says little). Words match
when equal, when one inflects the other (``refund``/``refunds``,
``track``/``tracking``) or when they share their first six letters; quoted text
and value-like tokens of the request (ids, hosts, emails) are arguments and
are not read. A value a tool's schema lists (a member of a parameter's
``enum``) that the request names as a word of its own, outside quotes, counts
too (``MEMBER_WEIGHT``): "assign role *viewer* to ..." is about the tool that
takes ``viewer``, "log a *sev2* for ..." about the one that takes ``sev2``.

The scores become log-space bonuses on the tool-name choice
(``ConstraintSession.prefer``), added to the model's own score when the choice
is scored whole; the model still decides, and nothing else (whether to call a
tool at all, the arguments) is touched. docs/constraints.md ("Tool relevance")
has the measurements behind the default weight.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

#: Log-space bonus per unit of relevance (a name word no other listed tool uses is
#: one unit): ``EmbeddedModel``'s default (``agentflow eval --tool-relevance`` is off
#: unless given).
DEFAULT_WEIGHT = 7.0

#: A description word counts this much of a name word: descriptions are prose,
#: with generic verbs ("send money back", "show the status of an invoice").
DESCRIPTION_WEIGHT = 0.5
#: An ``enum`` member of a tool's parameters that the request names counts this much
#: of a name word: a value only that tool takes says more than a word of its name.
MEMBER_WEIGHT = 1.5

_STOP_TEXT = """a an the to of for on in at by with and or not is are be been was were am
    my me mine i you your yours it its this that these those there here
    please pls can could would will shall should may might must do does did done
    we us our ours they them their he she his her from as up out so if then than
    hey hi hello thanks thank just need needs want wants get gets got let lets
    some any all one two what which who whom how why when where about into over
    also too very really now asap urgent kind bit"""
#: Words that say nothing about which tool is meant.
STOP_WORDS = frozenset(_STOP_TEXT.split())

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_LETTERS = re.compile(r"[A-Za-z]+")
_WORD = re.compile(r"[^\W\d_]+")  # runs of letters, any script
#: Quoted text in a request: an argument (a title, a message), not what it asks for.
QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”")
#: A token with a digit, ``@``, ``_``, or a ``.``/``-`` inside, or a path: an id, an
#: address, a host, ``/var/log``.
_VALUE_LIKE = re.compile(r"[0-9@_]|\w[.-]\w|^/\w")
_SUFFIXES = frozenset({"s", "es", "ed", "d", "ing", "er", "ers", "ion", "ions", "ment", "ments"})


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (identifiers split at case changes, ``_`` and
    ``-``), without stop words and words under three letters."""
    text = _CAMEL.sub(r"\1 \2", text).lower()
    return [w for w in _WORD.findall(text) if len(w) > 2 and w not in STOP_WORDS]


def identifier_words(identifier: str) -> list[str]:
    """All lower-case letter runs of ``identifier``, split at ``_``, ``-`` and case
    changes, stop words and short words kept (``stopOrder`` → ``["stop", "order"]``)."""
    return [w.lower() for w in _LETTERS.findall(_CAMEL.sub(r"\1 \2", identifier))]


def same_word(a: str, b: str) -> bool:
    """Equal, one an inflection of the other (``refund``/``refunds``,
    ``track``/``tracking``), or sharing their first six letters
    (``deactivate``/``deactivation``)."""
    if a == b:
        return True
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    if long.startswith(short) and long[len(short) :] in _SUFFIXES:
        return True
    return len(short) >= 6 and short[:6] == long[:6]


def letters_swapped(written: str, word: str) -> bool:
    """True when ``written`` is ``word`` with its letters after the first in another
    order ("canecl", "odrer", "tracknig"): a typo, for words of four letters or more."""
    return (
        len(written) == len(word) >= 4 and written[0] == word[0] and sorted(written) == sorted(word)
    )


def request_words(text: str) -> list[str]:
    """:func:`words` of a request, without its quoted text and value-like tokens
    (``web-prod-03``, ``a@b.io``, ``INV-2025``): those are arguments, not what the
    request asks for."""
    text = QUOTED.sub(" ", text)
    return words(" ".join(t for t in text.split() if not is_value_like(t)))


def holds_values(text: str) -> bool:
    """True when ``text`` quotes something or holds a value-like token (an id, a host,
    an e-mail, a number): what a tool call would take as an argument."""
    return bool(QUOTED.search(text)) or any(is_value_like(t) for t in text.split())


def is_value_like(token: str) -> bool:
    """True for a token that is an argument value once sentence punctuation is trimmed."""
    return bool(_VALUE_LIKE.search(token.strip(".,;:!?()'")))


class DescribedTool(Protocol):
    """What relevance reads of a tool (``ToolSpec`` has both; its ``parameters``,
    where it has them, give the ``enum`` members)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...


def tool_words(tool: DescribedTool) -> dict[str, float]:
    """The words of a tool's name (weight 1) and description (``DESCRIPTION_WEIGHT``)."""
    out = dict.fromkeys(words(tool.description or ""), DESCRIPTION_WEIGHT)
    out.update(dict.fromkeys(words(tool.name), 1.0))
    return out


def relevance(request: str, tools: Sequence[DescribedTool]) -> dict[str, float]:
    """Each tool's relevance to ``request``: the sum, over its words the request
    uses, of the word's weight times ``log(1 + n / df) / log(1 + n)`` (``n`` tools
    listed, ``df`` of them using the word): 1 for a name word no other tool uses,
    less the more tools share it, whatever the number of tools."""
    said = set(request_words(request))
    vocab = [tool_words(t) for t in tools]
    bare = QUOTED.sub(" ", request).lower()
    listed = [enum_members(getattr(t, "parameters", None)) for t in tools]
    n = len(tools)
    scale = math.log(1.0 + n)
    out: dict[str, float] = {}
    for tool, own, members in zip(tools, vocab, listed, strict=True):
        score = 0.0
        for w, weight in own.items():
            if any(same_word(w, r) for r in said):
                df = sum(1 for other in vocab if any(same_word(w, x) for x in other))
                score += weight * math.log(1.0 + n / df) / scale
        for member in members:
            if names_member(bare, member):
                df = sum(1 for other in listed if member in other)
                score += MEMBER_WEIGHT * math.log(1.0 + n / df) / scale
        out[tool.name] = score
    return out


def enum_members(schema: object) -> set[str]:
    """The string ``enum`` members anywhere in a parameters ``schema`` (lower-cased),
    but for stop words and single characters: the values a tool lists as the ones
    it takes."""
    found: set[str] = set()
    for node in schema_nodes(schema):
        members = node.get("enum")
        if isinstance(members, list):
            found.update(m.lower() for m in members if isinstance(m, str))
    return {m for m in found if len(m) > 1 and m not in STOP_WORDS}


def schema_nodes(schema: object) -> Iterator[Mapping[str, Any]]:
    """Every object anywhere in ``schema`` (itself included), depth first."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            yield node
            stack.extend(v for v in node.values() if isinstance(v, (Mapping, list)))
        elif isinstance(node, list):
            stack.extend(node)


def names_member(text: str, member: str) -> bool:
    """The lower-cased ``text`` holds ``member`` as a word of its own."""
    return re.search(rf"(?<![\w-]){re.escape(member)}(?![\w-])", text) is not None


def check_weight(weight: object, name: str = "tool relevance weight") -> float:
    """``weight`` as a float; ValueError naming ``name`` unless it is a finite number >= 0."""
    if (
        isinstance(weight, bool)
        or not isinstance(weight, (int, float))
        or not (math.isfinite(weight) and weight >= 0)
    ):
        raise ValueError(f"{name} must be a finite number >= 0, got {weight!r}")
    return float(weight)


def as_bonuses(scores: dict[str, float], weight: float) -> dict[str, float]:
    """``weight`` × each tool's score as log-space bonuses for ``ConstraintSession.prefer``,
    or an empty dict when ``weight`` is 0, fewer than two tools are scored or every
    score is 0 (nothing to prefer)."""
    if weight == 0 or len(scores) < 2 or not any(scores.values()):
        return {}
    return {name: weight * s for name, s in scores.items()}


def tool_bonuses(
    request: str, tools: Iterable[DescribedTool], weight: float = DEFAULT_WEIGHT
) -> dict[str, float]:
    """:func:`as_bonuses` of :func:`relevance`: ``weight`` × relevance for every listed
    tool (0 for those the request shares no word with), or an empty dict when it
    shares none with any, fewer than two tools are listed or ``weight`` is 0."""
    weight = check_weight(weight)
    listed = list(tools)
    if weight == 0 or len(listed) < 2:
        return {}
    return as_bonuses(relevance(request, listed), weight)
