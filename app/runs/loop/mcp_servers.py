"""The tools of a run's MCP servers (runs/tools/mcp) joined to the run's own: read back
from the run's history, or listed now and recorded before the first model call, so that
every turn of the run, resumed or not, is offered the same tools."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from app.agents.schemas import AgentRead
from app.core.vocabulary import StepKind
from app.runs.loop.boundary import Boundary
from app.runs.loop.deps import LoopDeps
from app.runs.loop.tool_runner import ToolRunner
from app.runs.store import history
from app.runs.tools.mcp.run_servers import EventSink, RunServers


@dataclass(frozen=True)
class RunTools:
    """What a run calls tools with: `agent` as the run sees it (its `tools` name its MCP
    tools too), `runner` over the process's tools and those, and the `listing` boundary to
    commit once the run has started (None: the run had recorded them)."""

    agent: AgentRead
    runner: ToolRunner
    servers: RunServers | None = None
    listing: Boundary | None = None


async def run_tools(deps: LoopDeps, run_id: str, agent: AgentRead, on_event: EventSink) -> RunTools:
    """`McpUnavailable` when a server cannot be started or listed at the run's start."""
    if not agent.mcp_servers:
        return RunTools(agent, deps.tools)
    servers = deps.mcp.for_run(agent, on_event=on_event)
    async with deps.sessionmaker() as session:
        recorded = await history.mcp_tools(session, run_id)
    listing = None
    if recorded is None:
        try:
            recorded = await servers.list_all()  # on failure, it stops what it started
        except asyncio.CancelledError:  # a shutdown during the listing
            await asyncio.shield(servers.close())
            raise
        events = [
            (
                "agent.mcp.tools_listed",
                {
                    "server": name,
                    "transport": entry["transport"],
                    "tools": [tool["name"] for tool in entry["tools"]],
                },
            )
            for name, entry in recorded.items()
        ]
        listing = Boundary(StepKind.NOTE, events=events, mcp_tools=recorded)
    else:
        servers.use_recorded(recorded)
    registry = deps.tools.registry
    tools = servers.loop_tools(taken=set(registry.names()))
    names = [tool.name for tool in tools]
    return RunTools(
        agent.model_copy(update={"tools": [*agent.tools, *names]}),
        replace(deps.tools, registry=registry.with_tools(tools)),
        servers,
        listing,
    )
