"""Two ways agents work together inside one run.

* **Handoff** — ``Agent(handoffs=[billing])`` gives the model a ``transfer_to_billing``
  tool; calling it passes the conversation (all messages so far) to ``billing``,
  which takes the next steps with its own instructions and tools. The run's result
  names the agent that finished.
* **Agent as tool** — ``support.as_tool()`` is a tool that runs the other agent on
  a task in a fresh conversation and returns its output; the caller stays in
  charge. The sub-run's usage is added to the caller's. With a run store, the
  sub-run's id is derived from the caller's call id, so a resumed caller resumes
  (or reuses) the sub-run instead of starting it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .context import RunContext
from .errors import RunNotFoundError
from .tool import Tool, tool

if TYPE_CHECKING:
    from .agent import Agent


def handoff(
    agent: Agent[Any, Any], *, name: str | None = None, description: str | None = None
) -> Tool:
    """A tool that hands the conversation over to ``agent``."""

    async def transfer() -> dict[str, str]:
        return {"handoff": agent.name}

    about = f": {agent.description}" if agent.description else ""
    result = tool(
        transfer,
        name=name or f"transfer_to_{agent.name}",
        description=description or f"Hand the conversation over to the {agent.name} agent{about}",
    )
    result.metadata["handoff"] = agent
    return result


def agent_tool(
    agent: Agent[Any, Any], *, name: str | None = None, description: str | None = None
) -> Tool:
    """A tool that runs ``agent`` on a task and returns its output."""

    async def delegate(ctx: RunContext[Any], task: str) -> Any:
        run_id = f"{ctx.run_id}.{ctx.call_id}" if ctx.call_id else None
        if agent.store is not None and run_id is not None:
            try:
                stored = await agent.store.load_run(run_id)
            except RunNotFoundError:
                stored = None
            if stored is not None and stored.status == "completed":
                return agent.validate_output(stored.output)
            if stored is not None and stored.status == "running":
                sub = await agent.resume(run_id, deps=ctx.deps)
                ctx.usage.add_run(sub.usage)
                return sub.output
            if stored is not None:  # a failed sub-run: start over under a fresh id
                run_id = None
        sub = await agent.run(task, deps=ctx.deps, run_id=run_id)
        ctx.usage.add_run(sub.usage)
        return sub.output

    delegate.__doc__ = """Delegate a task.

    Args:
        task: The task or question for the agent, with every detail it needs.
    """
    about = agent.description or f"Ask the {agent.name} agent to do a task"
    result = tool(delegate, name=name or agent.name, description=description or about)
    result.metadata["agent"] = agent
    return result
