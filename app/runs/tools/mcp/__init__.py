"""Agents' MCP tool servers (the official `mcp` SDK): the worker's policy (policy.py), one
server's connection held by a task of its own (connection.py, pinned.py for HTTP; the only
modules that load the SDK, when a run first starts a server), its tools as the loop's tools
(adapt.py), the servers of one run (run_servers.py) and of the process (hub.py)."""

from app.runs.tools.mcp.errors import McpUnavailable
from app.runs.tools.mcp.hub import McpHub
from app.runs.tools.mcp.policy import McpPolicy
from app.runs.tools.mcp.run_servers import RunServers

__all__ = ["McpHub", "McpPolicy", "McpUnavailable", "RunServers"]
