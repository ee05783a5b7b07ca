"""``agentflow step``: one agent step on a tool list, printed as the action and its stats.

The tools file is a JSON list of ``{"name", "description", "parameters"}``
objects (``parameters`` a JSON Schema; OpenAI's ``{"type": "function",
"function": {...}}`` wrapping is accepted too). With ``--json`` the output is
exactly one object: ``{"action": {"tool_calls": [{"name", "arguments"}]} |
{"final": ...}, "stats": {...}}``.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
from jsonschema import SchemaError as JSONSchemaError
from jsonschema.validators import validator_for

from agentflow.cli import CLIError, add_model_arguments, load_model
from agentflow.engine.chat_template import ChatMessage, ToolSpec
from agentflow.models.base import Model, StepRequest, StepResponse

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_KEYS = {"name", "description", "parameters"}


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "step",
        help="run one agent step on a tool list and print the action",
        description="Ask the model for one action (tool calls or a final answer) given a tool list "
        "and a user message. The action is constrained to the tools' JSON Schemas.",
    )
    parser.add_argument(
        "--tools", required=True, type=Path, metavar="FILE", help="JSON list of tools"
    )
    parser.add_argument("--message", "-m", required=True, help="the user's message")
    parser.add_argument("--instructions", default=None, help="system instructions for the agent")
    parser.add_argument(
        "--output-schema",
        type=Path,
        default=None,
        metavar="FILE",
        help="JSON Schema file for a structured final answer (default: text)",
    )
    add_model_arguments(parser)
    parser.add_argument("--max-new-tokens", type=int, default=None, help="cap on generated tokens")
    parser.add_argument("--temperature", type=float, default=None, help="0 = greedy (default)")
    parser.add_argument("--seed", type=int, default=None, help="seed for sampling")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def _read_json(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CLIError(f"cannot read {what} file {str(path)!r}: {exc.strerror or exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CLIError(
            f"{what} file {str(path)!r} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from exc


def _check_schema(schema: Any, where: str) -> None:
    if not isinstance(schema, dict):
        raise CLIError(
            f"{where} must be a JSON object (a JSON Schema), got {type(schema).__name__}"
        )
    try:
        validator_for(schema).check_schema(schema)
    except JSONSchemaError as exc:
        at = "/".join(str(p) for p in exc.path)
        raise CLIError(
            f"{where} is not a valid JSON Schema: {exc.message}" + (f" (at /{at})" if at else "")
        ) from exc


def parse_tools(data: Any) -> list[ToolSpec]:
    """Tool specs from decoded tools-file JSON; :class:`CLIError` names the first problem."""
    if not isinstance(data, list):
        raise CLIError(f"the tools file must hold a JSON list of tools, got {type(data).__name__}")
    tools: list[ToolSpec] = []
    for i, raw in enumerate(data):
        if (
            isinstance(raw, dict)
            and raw.get("type") == "function"
            and isinstance(raw.get("function"), dict)
        ):
            raw = raw["function"]
        if not isinstance(raw, dict):
            raise CLIError(f"tools[{i}] must be an object with name/description/parameters")
        name = raw.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise CLIError(
                f"tools[{i}]: 'name' must be a string matching {_NAME.pattern}, got {name!r}"
            )
        label = f"tool {name!r} (tools[{i}])"
        unknown = set(raw) - _KEYS - {"strict"}
        if unknown:
            raise CLIError(f"{label}: unknown key(s) {sorted(unknown)}; expected {sorted(_KEYS)}")
        description = raw.get("description", "")
        if not isinstance(description, str):
            raise CLIError(f"{label}: 'description' must be a string")
        if "parameters" not in raw:
            raise CLIError(f"{label}: 'parameters' (a JSON Schema) is missing")
        _check_schema(raw["parameters"], f"{label}: 'parameters'")
        if any(t.name == name for t in tools):
            raise CLIError(f"{label}: duplicate tool name")
        tools.append(ToolSpec(name=name, description=description, parameters=raw["parameters"]))
    return tools


def run(args: argparse.Namespace) -> int:
    from agentflow.action_schema import build_action_schema

    tools = parse_tools(_read_json(args.tools, "tools"))
    output_schema = None
    if args.output_schema is not None:
        output_schema = _read_json(args.output_schema, "output schema")
        _check_schema(output_schema, f"output schema {str(args.output_schema)!r}")
    if not args.message.strip():
        raise CLIError("--message is empty")
    settings: dict[str, Any] = {}
    for key in ("max_new_tokens", "temperature", "seed"):
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    request = StepRequest(
        messages=(ChatMessage("user", args.message),),
        tools=tuple(tools),
        action_schema=build_action_schema(tools, output_schema),
        output_schema=output_schema,
        instructions=args.instructions,
        mode=args.mode,
        settings=settings,
    )
    model = load_model(args.model, base_url=args.base_url)
    response = anyio.run(_one_step, model, request)
    action = response.action
    if action.is_final:
        action_json: dict[str, Any] = {"final": action.final}
    else:
        action_json = {
            "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in action.tool_calls]
        }
    stats = asdict(response.usage)
    if args.json:
        print(json.dumps({"action": action_json, "stats": stats}, ensure_ascii=False))
        return 0
    if action.is_final:
        final = (
            action.final
            if isinstance(action.final, str)
            else json.dumps(action.final, ensure_ascii=False)
        )
        print(f"final: {final}")
    for call in action.tool_calls:
        print(f"tool call: {call.name}({json.dumps(call.arguments, ensure_ascii=False)})")
    print(_stats_line(stats))
    return 0


async def _one_step(model: Model, request: StepRequest) -> StepResponse:
    try:
        return await model.step(request)
    finally:
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()


def _stats_line(stats: dict[str, Any]) -> str:
    parts = [f"model={stats.get('model') or '?'}"]
    if stats.get("mode"):
        parts.append(f"mode={stats['mode']}")
    parts.append(f"tokens in/out={stats.get('input_tokens', 0)}/{stats.get('output_tokens', 0)}")
    if stats.get("forward_passes"):
        parts.append(f"forward passes={stats['forward_passes']}")
    if stats.get("forced_tokens"):
        parts.append(f"forced tokens={stats['forced_tokens']}")
    parts.append(f"{stats.get('seconds', 0.0):.3f}s")
    return "stats: " + ", ".join(parts)
