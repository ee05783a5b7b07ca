"""Constraints: JSON Schema → exact regex → token automaton, enforced in each denoising step."""

from __future__ import annotations

from .._lazy_exports import lazy_exports

# Public names, imported on first use: the action schema is needed without torch.
_EXPORTS: dict[str, str] = {
    "action_schema": ".actions",
    "TokenAutomaton": ".automaton",
    "AutomatonStore": ".automaton_store",
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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
