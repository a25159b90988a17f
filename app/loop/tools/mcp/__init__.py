"""Agents' MCP tool servers (the official `mcp` SDK): the worker's policy (policy.py), one
server's connection held by a task of its own (connection.py, pinned.py for HTTP), its
tools as the loop's tools (adapt.py), the servers of one run (run_servers.py) and of the
process (hub.py)."""

from app.loop.tools.mcp.hub import McpHub
from app.loop.tools.mcp.policy import McpPolicy, McpUnavailable
from app.loop.tools.mcp.run_servers import RunServers

__all__ = ["McpHub", "McpPolicy", "McpUnavailable", "RunServers"]
