"""The set of tools a process knows, by name."""

from __future__ import annotations

from collections.abc import Iterable

from app.llm.provider import ToolSpec
from app.loop.tools.base import Tool


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is defined twice")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def specs(self, names: Iterable[str]) -> list[ToolSpec]:
        """What the model is told: the agent's tools that exist here, in its order."""
        return [self._tools[n].spec() for n in names if n in self._tools]

    def names(self) -> list[str]:
        return sorted(self._tools)
