"""One list, one call: calls of the same tool that share out a list the request gives once.

A diffusion model may write a list request as two calls of the tool that takes
the list: "restart hosts db-stg, node24 and mail-int12 please" became
``reset_servers(["db-stg", "node24"])`` and ``reset_servers(["db-stg",
"mail-int12"])``, and "restart hosts mail-eu and app-stg" a second call of
``["hosts", "app-stg", "app"]`` after the right one. The request names one
list, and asks for one call.

:func:`merged_list_calls` joins such calls: calls of one tool whose other
arguments are the same, whose list arguments hold items of one of the request's
lists (:func:`~.listed_values.request_lists`) and of no other, become the first
of them with the list's items they hold between them, in the request's order;
strings of theirs that are no item of it ("hosts", "app") go. Two lists
("a, b need a reboot plus restart hosts c & d") are two calls, and stay so.
Where the action left breaks the step's schema, nothing changes. Pure text
work, after decoding; docs/constraints.md ("Values mended after decoding,
thirteenth pass") has the measurements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .call_coverage import action_calls, with_calls
from .chat_template import ChatMessage
from .listed_values import request_lists


def merged_list_calls(
    text: str, messages: Sequence[ChatMessage], schema: Mapping[str, Any] | None = None
) -> tuple[str, list[str]] | None:
    """The action ``text`` with the calls that share out one of the request's lists
    joined (see the module's docstring), and the names of the calls joined away;
    None when there is none (or ``messages`` does not end with the request)."""
    calls = action_calls(text)
    if not calls or len(calls) < 2 or not messages or messages[-1].role != "user":
        return None
    written = request_lists(messages[-1].content)
    lists = [[item.lower() for item in found] for found in written]
    kept: list[dict[str, Any]] = []
    first_of: dict[tuple[str, str, int, str], int] = {}
    merged: dict[int, tuple[str, int]] = {}  # kept call -> (its list argument, its list)
    joined: list[str] = []
    for call in calls:
        key = _list_key(call, lists)
        if key is None or key not in first_of:
            if key is not None:
                first_of[key] = len(kept)
            kept.append(dict(call))
            continue
        at, name = first_of[key], key[1]
        kept[at] = _with_items(kept[at], name, [*_items(kept[at], name), *_items(call, name)])
        merged[at] = (name, key[2])
        joined.append(str(call.get("name")))
    if not joined:
        return None
    for at, (name, which) in merged.items():
        held = {str(i).lower() for i in _items(kept[at], name)}
        items = [w for w, low in zip(written[which], lists[which], strict=True) if low in held]
        kept[at] = _with_items(kept[at], name, items)
    action = with_calls(text, kept, schema)
    return None if action is None else (action, joined)


def _list_key(
    call: Mapping[str, Any], lists: Sequence[Sequence[str]]
) -> tuple[str, str, int, str] | None:
    """(tool, list argument, which request list, the other arguments) for a call whose
    one list argument holds items of exactly one request list; None otherwise."""
    arguments = call.get("arguments")
    if not isinstance(arguments, Mapping):
        return None
    arrays = [k for k, v in arguments.items() if isinstance(v, list)]
    if len(arrays) != 1:
        return None
    items = {str(i).lower() for i in arguments[arrays[0]] if isinstance(i, str)}
    found = [n for n, listed in enumerate(lists) if items & set(listed)]
    if len(found) != 1:
        return None
    others = repr(sorted((k, repr(v)) for k, v in arguments.items() if k != arrays[0]))
    return (str(call.get("name")), arrays[0], found[0], others)


def _items(call: Mapping[str, Any], name: str) -> list[Any]:
    return list(call["arguments"][name])


def _with_items(call: Mapping[str, Any], name: str, items: list[Any]) -> dict[str, Any]:
    return {**call, "arguments": {**call["arguments"], name: items}}
