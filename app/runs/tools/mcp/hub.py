"""The MCP side of a process: its policy, and every server connection its runs hold, so
that a server outlives neither its run nor the process (the composition root stops the hub
after the workers: what a run could not stop, the hub does)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from app.agents.schemas import AgentRead
from app.runs.tools.mcp.policy import McpPolicy
from app.runs.tools.mcp.run_servers import EventSink, RunServers

if TYPE_CHECKING:
    from app.runs.tools.mcp.connection import Connection

log = logging.getLogger(__name__)


class McpHub:
    def __init__(self, policy: McpPolicy | None = None) -> None:
        self.policy = policy or McpPolicy()
        self._live: set[Connection] = set()

    def for_run(self, agent: AgentRead, *, on_event: EventSink) -> RunServers:
        return RunServers(agent, self.policy, self._live, on_event=on_event)

    def warnings(self, agent: AgentRead) -> list[str]:
        return self.policy.warnings(agent)

    @property
    def open_connections(self) -> int:
        return len(self._live)

    async def stop(self) -> None:
        """Stop every server still running (their runs' loops were cancelled or lost)."""
        left = list(self._live)
        if left:
            log.warning("stopping %d MCP server(s) their runs left running", len(left))
        await asyncio.gather(*(c.close() for c in left), return_exceptions=True)
