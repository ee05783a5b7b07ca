"""Constraints: JSON Schema → exact regex → token automaton, enforced in each denoising step."""

from __future__ import annotations

from .actions import action_schema
from .automaton import TokenAutomaton
from .enforcement import Constraint, ConstraintSession, compile_constraint
from .index import (
    AutomatonStats,
    CompiledConstraint,
    ConstraintCompiler,
    build_token_automaton,
    token_vocabulary,
)
from .schema import CompiledSchema, OutputValidationError, compile_json_schema

__all__ = [
    "AutomatonStats",
    "CompiledConstraint",
    "CompiledSchema",
    "Constraint",
    "ConstraintCompiler",
    "ConstraintSession",
    "OutputValidationError",
    "TokenAutomaton",
    "action_schema",
    "build_token_automaton",
    "compile_constraint",
    "compile_json_schema",
    "token_vocabulary",
]
