"""IT operations: an agent that checks this machine and writes a structured incident report.

Tools read real system state — disk usage, load average, memory, whether a TCP
port answers, the tail of a log file — and the agent's final output is validated
into an ``IncidentReport`` (a pydantic model), so the caller gets typed data, not
prose to parse.

    python examples/it_ops.py "Is the disk on / filling up?"
    python examples/it_ops.py --model test "Check the web server on port 8080"
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from agentflow import Agent, Model, RunResult, TestModel, Tool, tool

INSTRUCTIONS = (
    "You are an on-call IT-ops assistant. Check the machine with the tools, then "
    "report: status ok, warning or critical, a one-sentence summary, and the actions "
    "you recommend. Base the report only on what the tools returned."
)


class IncidentReport(BaseModel):
    """The agent's final output."""

    status: Literal["ok", "warning", "critical"]
    summary: str
    actions: list[str] = Field(default_factory=list)


@tool
def disk_usage(path: str = "/") -> dict[str, Any]:
    """Disk usage of the file system holding a path.

    Args:
        path: Any path on the file system to check.
    """
    usage = shutil.disk_usage(path)
    return {
        "path": path,
        "total_gb": round(usage.total / 1e9, 1),
        "free_gb": round(usage.free / 1e9, 1),
        "used_percent": round(100 * usage.used / usage.total, 1),
    }


@tool
def load_average() -> dict[str, float]:
    """1, 5 and 15 minute load averages and the CPU count."""
    one, five, fifteen = os.getloadavg()
    return {
        "load_1m": one,
        "load_5m": five,
        "load_15m": fifteen,
        "cpus": float(os.cpu_count() or 1),
    }


@tool
def memory() -> dict[str, float]:
    """Total and available memory in GB (from /proc/meminfo)."""
    info: dict[str, int] = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        info[key] = int(rest.split()[0])  # kB
    total, available = info["MemTotal"], info.get("MemAvailable", info["MemFree"])
    return {
        "total_gb": round(total / 1e6, 2),
        "available_gb": round(available / 1e6, 2),
        "used_percent": round(100 * (total - available) / total, 1),
    }


@tool(timeout=5.0)
async def check_port(host: str, port: int) -> dict[str, Any]:
    """Whether a TCP port accepts connections.

    Args:
        host: Host name or IP address.
        port: TCP port number.
    """
    try:
        with anyio.fail_after(2.0):
            stream = await anyio.connect_tcp(host, port)
    except (OSError, TimeoutError) as exc:
        return {"host": host, "port": port, "open": False, "error": f"{type(exc).__name__}: {exc}"}
    await stream.aclose()
    return {"host": host, "port": port, "open": True}


def log_tool(log_dir: Path) -> Tool:
    """``tail_log``, restricted to files under ``log_dir``."""
    root = log_dir.resolve()

    @tool
    def tail_log(name: str, lines: int = 20) -> list[str]:
        """The last lines of a log file.

        Args:
            name: File name relative to the log folder, e.g. syslog.
            lines: How many lines (1-200).
        """
        if not 1 <= lines <= 200:
            raise ValueError(f"lines must be between 1 and 200, got {lines}")
        path = (root / name).resolve()
        if not path.is_relative_to(root):
            raise PermissionError(f"{name!r} is outside the log folder")
        if not path.is_file():
            raise FileNotFoundError(f"no log file {name!r} in {root}")
        with path.open(errors="replace") as f:
            return [line.rstrip("\n") for line in deque(f, maxlen=lines)]

    return tail_log


def build_agent(
    model: Model | str | None = None, log_dir: str | Path = "/var/log"
) -> Agent[None, IncidentReport]:
    """The IT-ops agent; ``model`` as in ``examples/customer_support.py``."""
    if model == "test":
        model = TestModel(call_tools=["disk_usage", "load_average", "memory"])
    return Agent(
        "it_ops",
        INSTRUCTIONS,
        [disk_usage, load_average, memory, check_port, log_tool(Path(log_dir))],
        output_type=IncidentReport,
        model=model,
        max_steps=6,
    )


async def run_check(message: str, model: Model | str | None = None) -> RunResult[IncidentReport]:
    """Run the agent on one request."""
    return await build_agent(model).run(message)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("message", nargs="?", default="Is this machine healthy?")
    parser.add_argument("--model", default=None, help="'test', 'hybrid', a checkpoint path")
    args = parser.parse_args(argv)
    result = anyio.run(lambda: run_check(args.message, args.model))
    print(f"request: {args.message}")
    for call in result.tool_calls:
        shown = call.error if call.error is not None else call.result
        print(f"  {call.name}({call.arguments}) -> {shown}")
    print(result.output.model_dump_json(indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
