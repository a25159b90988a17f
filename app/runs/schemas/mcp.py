"""An agent's MCP tool servers (`mcp_servers`): a command run over stdio, or a streamable
HTTP URL, each under a name that prefixes its tools (`files` → `files__read_file`).

Secrets stay out of the agent: a value of `env` or `headers` may hold `${NAME}`
references, which the worker replaces with its own environment variable `NAME` when it
starts the server, if the operator lets agents reference it (`LOOPWRIGHT_MCP__SECRET_ENV`).
What is stored is what every read shows: the references, never the secrets.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from app.webhooks.schemas import URL_MAX_CHARS, URL_PATTERN, checked_http_url

# Tool names reach the model as `<server>__<tool>` (letters, digits and underscores, at most
# 64 characters): a server's name has no double underscore, so the prefix is unambiguous.
SERVER_NAME_MAX = 24
SEPARATOR = "__"
SERVER_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*$"
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_SERVERS = 20


class McpTransport(StrEnum):
    """How the worker reaches an MCP server."""

    STDIO = "stdio"  # it runs `command` and speaks over its stdin and stdout
    HTTP = "http"  # it calls `url` (MCP's streamable HTTP transport)


ServerName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=SERVER_NAME_MAX, pattern=SERVER_NAME_PATTERN),
    Field(
        description="Unique among the agent's servers; its tools are offered to the model as "
        "`<name>__<tool>`. Letters, digits and single underscores, starting with a letter.",
        examples=["files"],
    ),
]
ServerToolName = Annotated[str, StringConstraints(pattern=r"^[^\s\x00-\x1f\x7f]{1,128}$")]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
EnvValue = Annotated[str, StringConstraints(max_length=8_000)]
HeaderName = Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")]
HeaderValue = Annotated[str, StringConstraints(pattern=r"^[\t\x20-\x7e]{0,4000}$")]


def _keys_as_property_names(schema: dict[str, Any]) -> None:
    """A map with constrained keys, as generators read it: `propertyNames` and the values'
    schema, rather than `patternProperties` (which lets other keys through)."""
    patterns = schema.pop("patternProperties", None)
    if patterns:
        ((pattern, value),) = patterns.items()
        schema["propertyNames"] = {"pattern": pattern}
        schema["additionalProperties"] = value


McpUrl = Annotated[
    str,
    Field(
        min_length=1,
        max_length=URL_MAX_CHARS,
        pattern=URL_PATTERN,
        description="An http(s) URL; a host in brackets is an IPv6 address.",
        examples=["https://mcp.example.com/mcp"],
    ),
    AfterValidator(checked_http_url),
]


class _ServerFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: ServerName
    tools: list[ServerToolName] | None = Field(
        None,
        max_length=200,
        description="Only these of the server's tools (by the server's names) are offered; "
        "absent: all it lists.",
    )
    timeout_s: float = Field(
        60.0,
        gt=0,
        le=3_600,
        description="How long one call may take (the run's time left bounds it too); a "
        "call that takes longer is an error, and the server is started afresh for the next.",
    )


class McpStdioServer(_ServerFields):
    """A command the worker runs, speaking MCP over its stdin and stdout: started for a run
    (at its start, or at its first call after a resume) and stopped when the run ends or
    pauses. It runs with `env` over a minimal environment (`HOME`, `PATH`, …), never the
    worker's own; the operator lists the commands agents may run
    (`LOOPWRIGHT_MCP__STDIO_COMMANDS`)."""

    transport: Literal[McpTransport.STDIO]
    command: Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f]{1,1000}$")] = Field(
        examples=["npx"]
    )
    args: list[Annotated[str, StringConstraints(max_length=4_000)]] = Field(
        default_factory=list, max_length=100, examples=[["-y", "@acme/mcp-files", "/srv/docs"]]
    )
    env: dict[EnvName, EnvValue] = Field(
        default_factory=dict,
        max_length=50,
        description="Environment variables of the server; a value may reference the "
        "worker's with `${NAME}` (secrets: see `LOOPWRIGHT_MCP__SECRET_ENV`).",
        examples=[{"DOCS_TOKEN": "${DOCS_TOKEN}"}],
        json_schema_extra=_keys_as_property_names,
    )


class McpHttpServer(_ServerFields):
    """An MCP server at a streamable HTTP URL. The URL must reach a public address unless
    the operator allows more (`LOOPWRIGHT_MCP__ALLOW_PRIVATE`, `…__ALLOWED_NETWORKS`),
    checked at every connection and pinned to the addresses checked."""

    transport: Literal[McpTransport.HTTP]
    url: McpUrl
    headers: dict[HeaderName, HeaderValue] = Field(
        default_factory=dict,
        max_length=50,
        description="Sent with every request (`Host` and the framing headers excepted); a "
        "value may reference the worker's environment with `${NAME}`.",
        examples=[{"Authorization": "Bearer ${SEARCH_TOKEN}"}],
        json_schema_extra=_keys_as_property_names,
    )


McpServer = Annotated[McpStdioServer | McpHttpServer, Field(discriminator="transport")]
AnyMcpServer = McpStdioServer | McpHttpServer


def _unique_names(servers: list[AnyMcpServer]) -> list[AnyMcpServer]:
    seen: set[str] = set()
    for server in servers:
        if server.name in seen:
            raise ValueError(f"two MCP servers are named {server.name!r}; names must be unique")
        seen.add(server.name)
    return servers


McpServers = Annotated[
    list[McpServer],
    Field(
        max_length=MAX_SERVERS,
        description="MCP tool servers whose tools this agent may call, without listing them in "
        "`tools`: each offered as `<server name>__<tool>`. Names are unique.",
    ),
    AfterValidator(_unique_names),
]


def tool_prefix(server_name: str) -> str:
    return f"{server_name}{SEPARATOR}"


def server_of(tool_name: str, server_names: set[str]) -> str | None:
    """The server whose tools `tool_name` would be one of (by its prefix), if any."""
    name, separator, rest = tool_name.partition(SEPARATOR)
    return name if separator and rest and name in server_names else None


def references(value: str) -> list[str]:
    """The environment variables a value refers to, in order."""
    return REFERENCE.findall(value)
