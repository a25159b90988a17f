"""The provider protocol: one streaming completion call, and the errors it may raise.

Providers do not retry: the caller's policy decides (SPEC C5), so the anthropic SDK runs
with `max_retries=0`. A provider reports failures as `ProviderError` carrying what the
policy needs: the HTTP status (None for transport failures), response headers and kind.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from app.core.messages import Block, Message

TextSink = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ToolChoice:
    """`auto` (the default), `any` (some tool), or `tool` (the one named)."""

    type: Literal["auto", "any", "tool"] = "auto"
    name: str | None = None


@dataclass(frozen=True)
class LLMRequest:
    model: str
    system: str
    messages: list[Message]
    max_tokens: int
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: ToolChoice | None = None
    timeout_s: float = 600.0
    turn: int = 0  # LLM calls the run made before this one (the scripted model's cursor)


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class LLMResponse:
    content: list[Block]
    stop_reason: str
    usage: Usage
    model: str


ErrorKind = Literal["http", "timeout", "connection"]


class ProviderError(Exception):
    """A failed provider call: an HTTP error status, a timeout, or a broken connection."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.message = message


class Provider(Protocol):
    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResponse:
        """Stream one completion, passing text deltas to `on_text` as they arrive, and
        return the whole message."""
        ...


@runtime_checkable
class RefreshesCredentials(Protocol):
    """A provider that can fetch its credentials again (after a 401)."""

    async def refresh_credentials(self) -> None: ...
