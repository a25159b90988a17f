"""The tool model and its factory.

`define_tool()` is the only way to make a tool, and its defaults fail closed: a tool is
assumed side-effecting (never retried, never re-run on resume), without fallback, required,
destructive and needing permission unless its definition says otherwise.

`destructive` (a call may destroy or irreversibly change something) always asks for a
person's approval unless the agent lists the tool in `auto_approve`, whatever the tool's
`idempotent` or `requires_approval` say.

Two properties say a call may be sent again: `idempotent` (repeating it changes nothing:
it needs no approval either) and `deduplicated` (it changes the world, but carries the
call's idempotency key to a remote that honours it, so a repeat takes effect once: it is
retried and re-sent on resume with the same key, and still asks for approval).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from app.llm.provider import ToolSpec

M = TypeVar("M", bound=BaseModel)


def idempotency_key(run_id: str, tool_call_id: str) -> str:
    """Stable for one tool call of one run, so a downstream service can deduplicate a call
    that had to be re-run."""
    digest = hashlib.sha256(f"{run_id}\x00{tool_call_id}".encode()).hexdigest()
    return f"lw-{digest[:32]}"


@dataclass(frozen=True)
class ToolContext:
    """What a tool knows about the call it serves."""

    run_id: str
    tool_call_id: str
    agent_id: str
    conversation_id: str
    services: Any = None  # built-ins reach the engines through this (see tools/builtins)
    # The run's lease, for tools that write on the run's behalf (the journal): their writes
    # are fenced like the loop's own, so a worker that lost the run writes nothing.
    lease_owner: str | None = None
    lease_token: int | None = None

    @property
    def idempotency_key(self) -> str:
        return idempotency_key(self.run_id, self.tool_call_id)


class ToolFailure(Exception):
    """A tool could not do its job. `transient` failures (timeouts, refused connections,
    429, 5xx) may be retried when the tool is idempotent; the message goes to the model."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient


def parse_arguments(model: type[M], arguments: Any) -> M:
    """A tool's arguments as `model`, or a ToolFailure naming every problem, for the model
    to correct its call."""
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        raise ToolFailure(f"invalid arguments: {problems}") from None


ToolHandler = Callable[[ToolContext, dict[str, Any]], Awaitable[str]]
IdempotencyRule = bool | Callable[[dict[str, Any]], bool]
BreakerScope = Callable[[dict[str, Any]], str | None]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler
    idempotent: IdempotencyRule = False
    retries: bool = False
    fallback: str | None = None  # another tool, run with the same input when this one fails
    optional: bool = False  # failing for good withdraws it from the run instead of failing
    destructive: IdempotencyRule = True  # per call, like `idempotent`
    requires_permission: bool = True
    pauses_run: bool = False  # ask_human and friends: the run waits for a person
    # None: a call that is not idempotent (it may change the world) waits for a person's
    # approval unless the agent lists the tool in `auto_approve`; True/False: always/never
    # (but a destructive call asks unless auto-approved, even with False).
    requires_approval: bool | None = None
    # The service a call reaches (an HTTP tool: the host), so that one service's outage
    # opens the breaker for calls to it only; None: one breaker for the whole tool.
    breaker_scope: BreakerScope | None = None
    # Tools that reach one service together share one breaker, `tool:<breaker_group>` (the
    # tools of one MCP server); None: the tool's own.
    breaker_group: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # The call sends its idempotency key to a remote that honours it (see the module's
    # docstring); per call, like `idempotent`.
    deduplicated: IdempotencyRule = False

    def is_idempotent(self, arguments: dict[str, Any]) -> bool:
        """Whether this call may be repeated safely (some tools decide per call: an HTTP
        GET is, a POST is not)."""
        return _decide(self.idempotent, arguments)

    def may_send_again(self, arguments: dict[str, Any]) -> bool:
        """Whether this call may be sent again after a failure or a crash: it is
        idempotent, or its remote deduplicates it by its key."""
        return self.is_idempotent(arguments) or _decide(self.deduplicated, arguments)

    def is_destructive(self, arguments: dict[str, Any]) -> bool:
        return _decide(self.destructive, arguments, undecided=True)

    def needs_approval(self, arguments: dict[str, Any], auto_approved: Collection[str]) -> bool:
        """Fail closed: a side-effecting call asks a person first, unless the tool says it
        never needs to or the agent's operator allowed it (`auto_approve`); a destructive
        call asks unless the operator allowed it, whatever the tool says."""
        if self.requires_approval is True:
            return True
        allowed = self.name in auto_approved
        if self.is_destructive(arguments):
            return not allowed
        if self.requires_approval is False:
            return False
        return not allowed and not self.is_idempotent(arguments)

    def breaker_name(self, arguments: dict[str, Any]) -> str:
        """`tool:<name>`, or `tool:<name>:<scope>` for a tool that names its services, or
        `tool:<group>` for one of a group."""
        if self.breaker_group is not None:
            return f"tool:{self.breaker_group}"
        try:
            scope = self.breaker_scope(arguments) if self.breaker_scope else None
        except Exception:  # arguments the rule cannot read: the tool-wide breaker
            scope = None
        return f"tool:{self.name}:{scope}" if scope else f"tool:{self.name}"

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)


def _decide(rule: IdempotencyRule, arguments: dict[str, Any], *, undecided: bool = False) -> bool:
    """A per-call rule's answer; `undecided` (the closed side) when it cannot decide."""
    if callable(rule):
        try:
            return bool(rule(arguments))
        except Exception:  # a rule that cannot decide fails closed
            return undecided
    return rule


def define_tool(
    name: str,
    description: str,
    input_schema: dict[str, Any],
    handler: ToolHandler,
    *,
    idempotent: IdempotencyRule = False,
    retries: bool = False,
    fallback: str | None = None,
    optional: bool = False,
    destructive: IdempotencyRule = True,
    requires_permission: bool = True,
    pauses_run: bool = False,
    requires_approval: bool | None = None,
    breaker_scope: BreakerScope | None = None,
    deduplicated: IdempotencyRule = False,
    breaker_group: str | None = None,
) -> Tool:
    """Make a tool. Every safety-relevant property must be given explicitly to loosen it."""
    if retries and idempotent is False and deduplicated is False:
        raise ValueError(f"tool {name!r}: only idempotent or deduplicated tools may be retried")
    if not name.replace("_", "").isalnum():
        raise ValueError(f"tool {name!r}: names are letters, digits and underscores")
    if fallback == name:
        raise ValueError(f"tool {name!r}: a tool cannot be its own fallback")
    return Tool(
        name=name,
        description=description,
        input_schema=input_schema,
        handler=handler,
        idempotent=idempotent,
        retries=retries,
        fallback=fallback,
        optional=optional,
        destructive=destructive,
        requires_permission=requires_permission,
        pauses_run=pauses_run,
        requires_approval=requires_approval,
        breaker_scope=breaker_scope,
        deduplicated=deduplicated,
        breaker_group=breaker_group,
    )
