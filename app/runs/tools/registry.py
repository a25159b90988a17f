"""The set of tools a process knows, by name."""

from __future__ import annotations

from collections.abc import Iterable

from app.llm.provider import ToolSpec
from app.runs.schemas.tools import ToolApproval, ToolIdempotency, ToolRead
from app.runs.tools.base import Tool


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is defined twice")
        self._tools[tool.name] = tool

    def with_tools(self, tools: Iterable[Tool]) -> ToolRegistry:
        """These tools and `tools` (a run's own: its agent's MCP tools)."""
        return ToolRegistry([*self._tools.values(), *tools])

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def specs(self, names: Iterable[str]) -> list[ToolSpec]:
        """What the model is told: the agent's tools that exist here, in its order."""
        return [self._tools[n].spec() for n in names if n in self._tools]

    def names(self) -> list[str]:
        return sorted(self._tools)

    def catalogue(self) -> list[ToolRead]:
        """Every tool as a client sees it, by name."""
        return [describe(self._tools[name]) for name in self.names()]


def describe(tool: Tool) -> ToolRead:
    if callable(tool.idempotent):
        idempotency = ToolIdempotency.BY_INPUT
    else:
        idempotency = ToolIdempotency.ALWAYS if tool.idempotent else ToolIdempotency.NEVER
    approval = {
        None: ToolApproval.SIDE_EFFECTS,
        True: ToolApproval.ALWAYS,
        False: ToolApproval.NEVER,
    }[tool.requires_approval]
    if approval is not ToolApproval.ALWAYS and tool.destructive is not False:
        approval = ToolApproval.SIDE_EFFECTS  # a destructive call asks unless auto-approved
    elif approval is ToolApproval.SIDE_EFFECTS and idempotency is ToolIdempotency.ALWAYS:
        approval = ToolApproval.NEVER  # no call of it has a side effect to approve
    return ToolRead(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        idempotency=idempotency,
        approval=approval,
        retried=tool.retries,
        fallback=tool.fallback,
    )
