"""What a worker lets agents' MCP servers do: the commands they may run, the addresses they
may reach, the secrets they may reference.

Both checks that need no I/O (a command, a reference) are also told to the client with the
agent (`warnings`), so a misconfigured agent is known before its first run fails.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from app.agents.schemas import AgentRead
from app.core.addresses import IPNetwork, literal, parse_networks, refusal_reason
from app.core.config import McpSettings
from app.runs.schemas.mcp import REFERENCE, McpHttpServer, McpStdioServer, references
from app.runs.tools.mcp.errors import McpUnavailable

AnyServer = McpStdioServer | McpHttpServer
ANY_COMMAND = "*"


@dataclass(frozen=True)
class McpPolicy:
    """`stdio_commands`: the commands a stdio server may run (`*`: any); `allow_private` and
    `allowed_networks`: the address policy of HTTP servers (as `http_request`'s);
    `secret_env`: the worker's variables `${NAME}` may name; `environ`: where they are read
    (the process's environment when the reference is resolved)."""

    stdio_commands: tuple[str, ...] = ()
    allow_private: bool = False
    allowed_networks: tuple[str, ...] = ()
    secret_env: tuple[str, ...] = ()
    start_timeout_s: float = 30.0
    environ: Callable[[], Mapping[str, str]] = field(default=lambda: os.environ, compare=False)
    networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.start_timeout_s > 0:
            raise ValueError("start_timeout_s must be positive")
        for name in ("stdio_commands", "allowed_networks", "secret_env"):
            if isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a sequence of strings")
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "networks", parse_networks(self.allowed_networks))

    @classmethod
    def from_settings(cls, settings: McpSettings) -> McpPolicy:
        return cls(
            stdio_commands=tuple(settings.stdio_commands),
            allow_private=settings.allow_private,
            allowed_networks=tuple(settings.allowed_networks),
            secret_env=tuple(settings.secret_env),
            start_timeout_s=settings.start_timeout_s,
        )

    def command_allowed(self, command: str) -> bool:
        return ANY_COMMAND in self.stdio_commands or command in self.stdio_commands

    def resolved(self, server: str, values: Mapping[str, str]) -> dict[str, str]:
        """`values` with each `${NAME}` replaced by the worker's variable; a name the
        operator did not list, or one not set here, is `McpUnavailable` (not retryable)."""
        environ = self.environ()

        def value_of(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in self.secret_env:
                raise McpUnavailable(server, _unlisted(name), retryable=False)
            if name not in environ:
                raise McpUnavailable(
                    server, f"${{{name}}} is not set in the worker's environment", retryable=False
                )
            return environ[name]

        return {key: REFERENCE.sub(value_of, value) for key, value in values.items()}

    def problems(self, server: AnyServer) -> list[str]:
        """What stops this server as configured, as far as is known without I/O."""
        found: list[str] = []
        if isinstance(server, McpStdioServer):
            if not self.command_allowed(server.command):
                found.append(
                    f"the command {server.command!r} is not one the operator lets agents run "
                    "(LOOPWRIGHT_MCP__STDIO_COMMANDS)"
                )
            values = server.env.values()
        else:
            if reason := self.url_refusal(server.url):
                found.append(reason)
            values = server.headers.values()
        for name in dict.fromkeys(n for value in values for n in references(value)):
            if name not in self.secret_env:
                found.append(_unlisted(name))
        return found

    def url_refusal(self, url: str) -> str | None:
        """Why a URL whose host is an IP address (or `localhost`) is refused; names are
        resolved and checked when a run connects."""
        host = (urlsplit(url).hostname or "").lower()
        address = literal(host)
        if address is None and (host == "localhost" or host.endswith(".localhost")):
            address = literal("127.0.0.1")
        if address is None or not (reason := refusal_reason(address, self)):
            return None
        return (
            f"its URL reaches a {reason} (MCP server URLs must reach public addresses unless "
            "the operator allows them: LOOPWRIGHT_MCP__ALLOWED_NETWORKS)"
        )

    def warnings(self, agent: AgentRead) -> list[str]:
        """Why the agent's runs would fail on its MCP servers as configured now."""
        return [
            f"MCP server {server.name!r}: {problem}"
            for server in agent.mcp_servers
            for problem in self.problems(server)
        ]


def _unlisted(name: str) -> str:
    return (
        f"${{{name}}} is not a variable the operator lets agents reference "
        "(LOOPWRIGHT_MCP__SECRET_ENV)"
    )
