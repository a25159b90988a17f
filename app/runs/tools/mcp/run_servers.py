"""The MCP servers of one run's execution: their tools listed once per run and recorded in
its history, servers started and reused within the execution, and stopped when it ends.

    run start, nothing recorded  start every server, list its tools, keep them open;
                                 the loop records the list (a `note` step) before the
                                 first model call
    resumed, a list recorded     the recorded tools are offered, whatever the servers list
                                 now; a server starts at the first call that needs it
    a call                       the server (started again if it went away) → one call,
                                 bounded by the server's `timeout_s`
    a server that dies or hangs  the call is a transient tool error (the runner retries it
                                 if the tool may repeat); the next call, or retry, starts
                                 the server again, once; the server's breaker counts the
                                 failures, and once it opens no call starts it
    the execution ends           every server is stopped (`close`), whatever the ending

A server that cannot be started or listed at run start fails the run (`McpUnavailable`):
its tools would be missing from every later turn.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import sys
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any

from app.agents.schemas import AgentRead
from app.runs.tools.base import Tool, ToolFailure
from app.runs.tools.mcp.adapt import ListedTool, as_tool, listed
from app.runs.tools.mcp.errors import ConnectionLost, McpUnavailable, ServerError
from app.runs.tools.mcp.policy import AnyServer, McpPolicy

if TYPE_CHECKING:  # loaded with the SDK when a run first starts a server
    from app.runs.tools.mcp.connection import Connection

log = logging.getLogger(__name__)

_CONNECTION = "app.runs.tools.mcp.connection"

EventSink = Callable[[str, dict[str, Any]], Awaitable[None]]
Recorded = dict[str, Any]  # {server name: {"transport", "tools": [ListedTool.record()]}}


class RunServers:
    """One execution's MCP servers (`connections` is shared with the process's hub, which
    stops whatever is left at shutdown)."""

    def __init__(
        self,
        agent: AgentRead,
        policy: McpPolicy,
        connections: set[Connection],
        *,
        on_event: EventSink,
    ) -> None:
        """`connections`: the process's live connections, which each joins while it runs."""
        self.agent = agent
        self.policy = policy
        self._configs: dict[str, AnyServer] = {s.name: s for s in agent.mcp_servers}
        self._live = connections
        self._on_event = on_event
        self._connections: dict[str, Connection] = {}
        self._starts: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.tools: list[ListedTool] = []

    async def list_all(self) -> Recorded:
        """Start every server and list its tools (`McpUnavailable` for the first that
        fails, once every started server is stopped again); the list to record."""
        servers = list(self._configs.values())
        outcomes = await asyncio.gather(
            *(self._list(server) for server in servers), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                await self.close()
                raise outcome
        record: Recorded = {}
        for server, found in zip(servers, outcomes, strict=True):
            assert not isinstance(found, BaseException)
            record[server.name] = {
                "transport": server.transport.value,
                "tools": [tool.record() for tool in found],
            }
            self.tools += found
        return record

    def use_recorded(self, record: Recorded) -> None:
        """Offer the tools the run listed before (servers start at their first call)."""
        self.tools = [
            ListedTool.recorded(tool) for entry in record.values() for tool in entry["tools"]
        ]

    def loop_tools(self, taken: Collection[str]) -> list[Tool]:
        """The listed tools as the loop calls them, less any whose name a tool of the
        process already has."""
        group = f"mcp:{self.agent.id}"
        tools = []
        for listed_tool in self.tools:
            if listed_tool.name in taken:
                log.warning("MCP tool %s hides behind a tool of the same name", listed_tool.name)
                continue
            tools.append(
                as_tool(listed_tool, self.call, breaker_group=f"{group}/{listed_tool.server}")
            )
        return tools

    async def call(self, server_name: str, tool: str, arguments: dict[str, Any]) -> str:
        """One call of a server's tool, as the loop's tool handler makes it."""
        server = self._configs.get(server_name)
        if server is None:
            raise ToolFailure(
                f"the MCP server {server_name!r} is no longer configured for this agent"
            )
        connection = await self._started(server)
        try:
            async with asyncio.timeout(server.timeout_s) as deadline:
                text, is_error = await connection.call(tool, arguments)
        except TimeoutError:
            if not deadline.expired():
                raise  # the run's own time is up: not this server's failure
            await self._failed(connection, "timeout", f"no answer in {server.timeout_s:g} s")
            raise ToolFailure(
                f"the MCP server {server_name!r} did not answer within {server.timeout_s:g} s",
                transient=True,
            ) from None
        except ConnectionLost as lost:
            await self._failed(connection, "call", str(lost))
            raise ToolFailure(
                f"the MCP server {server_name!r} stopped during the call, which may or may not "
                f"have taken effect ({lost})",
                transient=True,
            ) from None
        except ServerError as exc:
            raise ToolFailure(f"the MCP server {server_name!r} {exc}") from None
        if is_error:  # the tool's own failure, for the model to read: not the server's
            raise ToolFailure(text or "the tool reported an error and said nothing more")
        return text

    async def close(self) -> None:
        """Stop every server this execution started; none is left running."""
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    # -- servers ---------------------------------------------------------------------

    async def _list(self, server: AnyServer) -> list[ListedTool]:
        connection = await self._start(server)
        try:
            async with asyncio.timeout(self.policy.start_timeout_s):
                tools = await connection.list_tools()
        except TimeoutError:
            message = f"did not list its tools within {self.policy.start_timeout_s:g} s"
            raise McpUnavailable(server.name, message, retryable=True) from None
        except (ConnectionLost, ServerError) as exc:
            message = f"could not list its tools ({str(exc)[:300]})"
            raise McpUnavailable(server.name, message, retryable=True) from None
        return listed(server.name, tools, server.tools)

    async def _started(self, server: AnyServer) -> Connection:
        """The server's connection, started (again) when it has none alive."""
        lock = self._locks.setdefault(server.name, asyncio.Lock())
        async with lock:
            current = self._connections.get(server.name)
            if current is not None and current.alive:
                return current
            if current is not None:
                await current.close()
            try:
                connection = await self._start(server)
            except McpUnavailable as exc:
                await self._on_event(
                    "agent.mcp.server_failed",
                    {"server": server.name, "stage": "start", "error": exc.reason},
                )
                raise ToolFailure(str(exc), transient=exc.retryable) from None
            if current is not None:
                await self._on_event(
                    "agent.mcp.server_restarted",
                    {"server": server.name, "restarts": self._starts[server.name] - 1},
                )
            return connection

    async def _start(self, server: AnyServer) -> Connection:
        sdk = await _connection_module()
        self._starts[server.name] = self._starts.get(server.name, 0) + 1
        connection: Connection = sdk.Connection(server, self.policy, self._live)
        await connection.start()  # a start that fails leaves nothing running
        self._connections[server.name] = connection
        return connection

    async def _failed(self, connection: Connection, stage: str, error: str) -> None:
        """A server that died or hung is let go at once (its stopping goes on in its own
        task); the next call starts another."""
        connection.close_soon()
        await self._on_event(
            "agent.mcp.server_failed",
            {"server": connection.server.name, "stage": stage, "error": error[:500]},
        )


async def _connection_module() -> Any:
    """The module that speaks MCP, loaded on a thread the first time: the SDK takes most of
    a second to import (more on a busy machine), which on the event loop would stall every
    run of the process, their lease heartbeats too."""
    module = sys.modules.get(_CONNECTION)
    if module is None:
        module = await asyncio.to_thread(importlib.import_module, _CONNECTION)
    return module
