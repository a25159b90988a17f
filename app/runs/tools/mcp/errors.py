"""How an MCP server fails, in words the loop understands without loading the SDK."""

from __future__ import annotations


class McpUnavailable(Exception):
    """An MCP server of the agent could not be started, reached or listed. `retryable`:
    another attempt later may succeed (it crashed, timed out, refused a connection), as
    opposed to a configuration the operator must change."""

    def __init__(self, server: str, message: str, *, retryable: bool) -> None:
        super().__init__(f"MCP server {server!r}: {message}")
        self.server = server
        self.reason = message
        self.retryable = retryable


class ConnectionLost(Exception):
    """The server went away (its process exited, its connection closed) during a call."""


class ServerError(Exception):
    """The server answered a call with a protocol error, or with a result that cannot be
    read (the message says which): it is up, and would answer the same again."""
