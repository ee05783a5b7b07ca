"""JSON value identity as JSON Schema defines it (``1 == 1.0``, ``true != 1``)."""

from __future__ import annotations

from typing import Any


def canonical(value: Any) -> Any:
    """A hashable key equal for exactly the JSON-equal values."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("num", value)
    if isinstance(value, float):
        return ("num", int(value)) if value.is_integer() else ("num", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("arr", tuple(canonical(v) for v in value))
    if isinstance(value, dict):
        return ("obj", frozenset((k, canonical(v)) for k, v in value.items()))
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def json_type(value: Any) -> str:
    """The JSON type of a value (integers are ``number``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"not a JSON value: {type(value).__name__}")
