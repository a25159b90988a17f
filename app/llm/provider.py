"""The provider protocol: one streaming completion call, the neutral errors it may raise,
and how providers are handed out per agent.

Providers never retry: the caller's policy decides whether and when to try again, so
each provider turns its vendor's failures into a `ProviderError` of a neutral class (the
vendor-specific reading of statuses and messages stays in the provider's own module), and
the policy reads only the neutral fields.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from app.core.messages import Block, Message
from app.core.model_config import ModelConfig

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
    """The tokens of one call. `input_tokens` are the ones read afresh; tokens written to
    or read from the provider's prompt cache are counted apart (priced apart)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0


UsageSink = Callable[[Usage], None]


@dataclass(frozen=True)
class LLMResponse:
    content: list[Block]
    stop_reason: str
    usage: Usage
    model: str


# Why a call failed, whatever the vendor. In groups:
#   context_overflow: the prompt plus the answer asked for do not fit the model's window;
#   capacity: rate_limited (this client asks too often), overloaded (the service is full);
#   auth: the credentials were refused (fresh ones may help);
#   refused: bad_request, forbidden, not_found: the request itself is wrong;
#   transient: request_timeout, conflict, server_error (the service's side), timeout
#     (nothing arrived in time), connection (refused, reset, or a stream cut short).
ErrorClass = Literal[
    "context_overflow",
    "rate_limited",
    "overloaded",
    "auth",
    "bad_request",
    "forbidden",
    "not_found",
    "request_timeout",
    "conflict",
    "server_error",
    "timeout",
    "connection",
]
REFUSED: frozenset[ErrorClass] = frozenset({"bad_request", "forbidden", "not_found"})
TRANSIENT: frozenset[ErrorClass] = frozenset(
    {"request_timeout", "conflict", "server_error", "timeout", "connection"}
)


@dataclass(frozen=True)
class Overflow:
    """A context overflow's numbers, each None when the vendor does not state it: the
    prompt's tokens, the answer's `max_tokens` asked for, and the model's context window."""

    input_tokens: int | None = None
    max_tokens: int | None = None
    context_window: int | None = None


class ProviderError(Exception):
    """A failed provider call, in neutral terms: its class, a message for people, the HTTP
    status if the vendor answered one (None for transport failures), the response headers
    (lower-cased; `retry-after` is read from them), the overflow's numbers for a
    `context_overflow`, and the server's own verdict on retrying when it gave one."""

    def __init__(
        self,
        error_class: ErrorClass,
        message: str,
        *,
        status: int | None = None,
        headers: dict[str, str] | None = None,
        overflow: Overflow | None = None,
        should_retry: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.error_class: ErrorClass = error_class
        self.message = message
        self.status = status
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.overflow = overflow
        self.should_retry = should_retry


class Provider(Protocol):
    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        """Stream one completion, passing text deltas to `on_text` as they arrive and the
        usage to `on_usage` as it becomes known (so that a call abandoned halfway is still
        accounted for), and return the whole message."""
        ...


@runtime_checkable
class RefreshesCredentials(Protocol):
    """A provider that can fetch its credentials again (after a 401)."""

    async def refresh_credentials(self) -> None: ...


class ModelOwner(Protocol):
    """Whose model a provider serves: an agent, by id and version, and its model config."""

    @property
    def id(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def model(self) -> ModelConfig: ...


class ProviderUnavailable(Exception):
    """The agent's model needs a provider this process cannot offer (no such provider, or
    no credentials for it)."""


class ProviderPool(Protocol):
    """Hands out the providers of one vendor and keeps the ones it made (shared clients,
    or per-run state), closing them with the process."""

    def __call__(self, owner: ModelOwner, run_id: str) -> Provider:
        """The provider for this owner's model in this run; ProviderUnavailable if none."""
        ...

    async def aclose(self) -> None: ...
