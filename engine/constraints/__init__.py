"""Constraints: JSON Schema → exact regex → token automaton, enforced in each denoising step."""

from __future__ import annotations

import importlib
from typing import Any

# Public names, imported on first use: the action schema is needed without torch.
_EXPORTS: dict[str, str] = {
    "action_schema": ".actions",
    "TokenAutomaton": ".automaton",
    "Constraint": ".enforcement",
    "ConstraintSession": ".enforcement",
    "compile_constraint": ".enforcement",
    "AutomatonStats": ".index",
    "CompiledConstraint": ".index",
    "ConstraintCompiler": ".index",
    "build_token_automaton": ".index",
    "token_vocabulary": ".index",
    "CompiledSchema": ".schema",
    "OutputValidationError": ".schema",
    "compile_json_schema": ".schema",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
