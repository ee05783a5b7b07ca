"""``@tool``: a typed Python function (sync or async) becomes a tool the model can call.

pydantic builds the parameter schema from the signature; the docstring's first
paragraph is the description and its ``Args:`` section (Google style) or
``:param x:`` lines (Sphinx style) describe the parameters. A first parameter
annotated :class:`~agentflow.context.RunContext` receives the run context and is
not part of the schema.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_origin, get_type_hints, overload

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, create_model

from agentflow.engine.chat_template import ToolSpec

from .context import RunContext
from .errors import ToolDefinitionError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns?|Raises|Yields?|Examples?|Notes?):\s*$"
)
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from a Google- or Sphinx-style docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section, current, arg_indent = header.group(1).lower(), None, None
            continue
        sphinx = _SPHINX.match(line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            section = "sphinx"
            continue
        if section is None:
            desc.append(line)
        elif section in ("args", "arguments", "parameters", "params"):
            indent = len(line) - len(line.lstrip())
            match = _ARG_LINE.match(line)
            if match and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif section == "sphinx" and current and line.strip() and not line.lstrip().startswith(":"):
            params[current] = f"{params[current]} {line.strip()}"
    description = " ".join(" ".join(desc).split())
    return description, params


def _strip_titles(node: Any) -> Any:
    """Drop pydantic's generated ``title`` keys (noise for the model); keep properties named title."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
            else:
                out[key] = _strip_titles(value)
        return out
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def _is_context(annotation: Any) -> bool:
    target = get_origin(annotation) or annotation
    return isinstance(target, type) and issubclass(target, RunContext)


@dataclass(eq=False)
class Tool:
    """A callable the model can ask for, with the JSON Schema of its arguments."""

    function: Callable[..., Any]
    name: str
    description: str
    parameters: dict[str, Any]
    args_model: type[BaseModel]
    #: Seconds before the call is cancelled and reported as a timeout; None = the agent's default.
    timeout: float | None = None
    takes_context: bool = False
    is_async: bool = False
    #: Extra data for the runtime (handoffs and agents-as-tools mark themselves here).
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> ToolSpec:
        """What the model sees: name, description, parameter schema."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments; raises ``pydantic.ValidationError`` on bad input."""
        model = self.args_model.model_validate(dict(arguments))
        return {name: getattr(model, name) for name in type(model).model_fields}

    async def invoke(self, arguments: Mapping[str, Any], ctx: RunContext[Any] | None = None) -> Any:
        """Validate ``arguments`` and call the function (sync functions run in a worker thread)."""
        return await self.call_validated(self.validate(arguments), ctx)

    async def call_validated(
        self, kwargs: dict[str, Any], ctx: RunContext[Any] | None = None
    ) -> Any:
        """Call the function with arguments :meth:`validate` already checked."""
        args: tuple[Any, ...] = (ctx,) if self.takes_context else ()
        if self.is_async:
            return await self.function(*args, **kwargs)
        return await anyio.to_thread.run_sync(
            functools.partial(self.function, *args, **kwargs), abandon_on_cancel=True
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (handy in users' own tests)."""
        return self.function(*args, **kwargs)


def _build_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    timeout: float | None,
) -> Tool:
    if not callable(fn):
        raise ToolDefinitionError(f"tool() needs a function, got {type(fn).__name__}")
    tool_name = name or getattr(fn, "__name__", "")
    if not _NAME.match(tool_name):
        raise ToolDefinitionError(
            f"tool name {tool_name!r} must match {_NAME.pattern} (letters, digits, _ and -)"
        )
    if timeout is not None and timeout <= 0:
        raise ToolDefinitionError(f"tool {tool_name!r}: timeout must be positive, got {timeout}")
    doc_desc, doc_params = parse_docstring(inspect.getdoc(fn))
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:  # unresolved forward references, etc.
        raise ToolDefinitionError(f"tool {tool_name!r}: cannot resolve annotations: {exc}") from exc
    fields: dict[str, Any] = {}
    takes_context = False
    for index, param in enumerate(inspect.signature(fn).parameters.values()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: *args/**kwargs parameter {param.name!r} has no schema"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: positional-only parameter {param.name!r} cannot be passed by name"
            )
        annotation = hints.get(param.name, inspect.Parameter.empty)
        if annotation is not inspect.Parameter.empty and _is_context(annotation):
            if index != 0:
                raise ToolDefinitionError(
                    f"tool {tool_name!r}: the RunContext parameter must come first"
                )
            takes_context = True
            continue
        if annotation is inspect.Parameter.empty:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} needs a type annotation"
            )
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (
            annotation,
            Field(default, description=doc_params.get(param.name) or None),
        )
    try:
        args_model = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )
        parameters = _strip_titles(args_model.model_json_schema())
    except Exception as exc:  # pydantic cannot build a schema for some annotation
        raise ToolDefinitionError(f"tool {tool_name!r}: cannot build a schema: {exc}") from exc
    parameters.setdefault("properties", {})
    return Tool(
        function=fn,
        name=tool_name,
        description=description if description is not None else doc_desc,
        parameters=parameters,
        args_model=args_model,
        timeout=timeout,
        takes_context=takes_context,
        is_async=inspect.iscoroutinefunction(fn),
    )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function into a :class:`Tool`; use as ``@tool`` or ``@tool(timeout=5)``."""
    if fn is not None:
        return _build_tool(fn, name=name, description=description, timeout=timeout)

    def decorate(func: Callable[..., Any]) -> Tool:
        return _build_tool(func, name=name, description=description, timeout=timeout)

    return decorate


def as_tool(obj: Tool | Callable[..., Any]) -> Tool:
    """A :class:`Tool` as is; a plain function is wrapped with :func:`tool`."""
    return obj if isinstance(obj, Tool) else tool(obj)


ToolFunction = Callable[..., Any] | Callable[..., Awaitable[Any]]

__all__ = ["Tool", "ToolFunction", "as_tool", "parse_docstring", "tool"]
