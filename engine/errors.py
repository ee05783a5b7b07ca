"""Exceptions raised by the engine. Each names what went wrong and where."""

from __future__ import annotations

from pathlib import Path


class EngineError(Exception):
    """Base class of every engine error."""


class CheckpointError(EngineError):
    """A checkpoint folder or file is missing, corrupt, or of an unknown format."""

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        super().__init__(message)
        self.path = Path(path) if path is not None else None


class ContextLengthError(EngineError):
    """A prompt (plus the tokens to generate) does not fit the model's context."""

    def __init__(self, prompt_tokens: int, max_tokens: int) -> None:
        super().__init__(
            f"prompt of {prompt_tokens} tokens does not fit the model's context of {max_tokens} tokens"
        )
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens


class SchemaError(EngineError):
    """A JSON Schema uses something the constraint engine cannot enforce exactly."""

    def __init__(self, message: str, *, keyword: str | None = None, pointer: str = "") -> None:
        where = f" at {pointer or '/'}" if keyword is not None or pointer else ""
        super().__init__(f"{message}{where}")
        self.keyword = keyword
        self.pointer = pointer


class InfeasibleConstraintError(EngineError):
    """No completion of the current block can satisfy the constraint."""


class TokenizerMismatchError(EngineError):
    """Two models that must share a tokenizer do not."""
