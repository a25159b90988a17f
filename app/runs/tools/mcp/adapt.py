"""MCP tools as the loop's tools: the names the model sees, and the safety properties read
from the tools' annotations (failing closed).

    readOnlyHint true          idempotent, not destructive: no approval, retried, re-run
    idempotentHint true        idempotent (retried, re-run on resume); destructive unless
                               destructiveHint is false
    no annotations             side-effecting and destructive: asks for approval unless
                               the agent auto-approves it, never retried or re-run

(The spec's defaults: `destructiveHint` true and `idempotentHint` false unless stated;
`readOnlyHint` true makes the other two moot.) Hints are the server's word, which the
operator chose to trust when it configured the server.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from app.runs.schemas.mcp import tool_prefix
from app.runs.tools.base import Tool, ToolContext, define_tool

MAX_NAME = 64  # what model APIs accept as a tool's name
MAX_DESCRIPTION = 4_000
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_]")

Call = Callable[[str, str, dict[str, Any]], Awaitable[str]]  # (server, tool, arguments)


@dataclass(frozen=True)
class ListedTool:
    """A tool of a server as a run recorded it when it listed its servers: what the model
    is offered for the rest of the run, whatever the server lists later."""

    server: str
    name: str  # as the model calls it: `<server>__<tool>`
    tool: str  # as the server names it
    description: str
    input_schema: dict[str, Any]
    read_only: bool | None = None  # the annotations' hints, as listed (None: not given)
    idempotent: bool | None = None
    destructive: bool | None = None

    @property
    def may_repeat(self) -> bool:
        """A repeat changes nothing more: it may be retried, and re-run on resume."""
        return bool(self.read_only or self.idempotent)

    @property
    def is_destructive(self) -> bool:
        return not self.read_only and self.destructive is not False

    def record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def recorded(cls, data: dict[str, Any]) -> ListedTool:
        return cls(**data)


@dataclass(frozen=True)
class ServerTool:
    """A tool as its server lists it (the SDK's model, read by the connection)."""

    name: str
    description: str | None
    input_schema: Any
    read_only: bool | None = None
    idempotent: bool | None = None
    destructive: bool | None = None


def listed(server: str, tools: list[ServerTool], only: list[str] | None) -> list[ListedTool]:
    """A server's tools as the run offers them (`only`: the ones its agent named), each under
    a name of its own."""
    taken: set[str] = set()
    found: list[ListedTool] = []
    for tool in tools:
        if only is not None and tool.name not in only:
            continue
        name = exposed_name(server, tool.name, taken)
        taken.add(name)
        found.append(
            ListedTool(
                server=server,
                name=name,
                tool=tool.name,
                description=(tool.description or tool.name)[:MAX_DESCRIPTION],
                input_schema=_object_schema(tool.input_schema),
                read_only=tool.read_only,
                idempotent=tool.idempotent,
                destructive=tool.destructive,
            )
        )
    return found


def exposed_name(server: str, tool: str, taken: set[str]) -> str:
    """`<server>__<tool>`, the tool's name made of letters, digits and underscores; cut
    with a hash of the original when it is too long or two names would meet."""
    prefix = tool_prefix(server)
    name = prefix + _NOT_A_NAME.sub("_", tool)
    if len(name) <= MAX_NAME and name not in taken:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def as_tool(listed_tool: ListedTool, call: Call, *, breaker_group: str) -> Tool:
    """The loop's tool for one listed tool: every call goes through `call`, and the tools of
    one server share its breaker (`tool:<breaker_group>`)."""

    async def handler(context: ToolContext, arguments: dict[str, Any]) -> str:
        return await call(listed_tool.server, listed_tool.tool, arguments)

    return define_tool(
        listed_tool.name,
        listed_tool.description,
        listed_tool.input_schema,
        handler,
        idempotent=listed_tool.may_repeat,
        retries=listed_tool.may_repeat,
        destructive=listed_tool.is_destructive,
        breaker_group=breaker_group,
    )


def _object_schema(schema: Any) -> dict[str, Any]:
    """Model APIs take an object's schema; a server's that says otherwise is wrapped."""
    if not isinstance(schema, dict):
        return {"type": "object"}
    if "type" not in schema:
        return {**schema, "type": "object"}
    return schema if schema["type"] == "object" else {"type": "object"}
