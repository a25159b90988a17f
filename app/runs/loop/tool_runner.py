"""Runs one tool call through the error pipeline: an unknown tool, arguments that were not
a JSON object, an aborted call, a permission denied and a failed execution each become an
error result for the model, never an exception that would leave a `tool_use` unanswered.

A failing call climbs the escalation ladder, cheapest rung first:

    retry     transient failures of retryable tools whose call may be sent again
              (idempotent, or deduplicated by its remote), with backoff
    fallback  the tool's declared `fallback` tool, with the same input
    degrade   an `optional` tool is withdrawn for the rest of the run
    fail      the last error goes to the model

Each tool (or each service a tool reaches, see `Tool.breaker_scope`) has a circuit
breaker, consulted before every attempt: while it is open the tool is not called at all
and the ladder goes straight to its fallback.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from app.core.breakers import Breakers, BreakerState, CircuitBreaker, breaker_event
from app.core.messages import ToolUseBlock, unparsed_arguments
from app.core.sanitize import sanitize
from app.runs.loop.retry import ToolRetryPolicy, tool_retry_delay
from app.runs.schemas.runs import WaitingFor
from app.runs.tools.base import Tool, ToolContext, ToolFailure
from app.runs.tools.registry import ToolRegistry
from app.telemetry import spans

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
OnRetry = Callable[[dict[str, Any]], Awaitable[None]]
OnEvent = Callable[[str, dict[str, Any]], Awaitable[None]]


async def _no_event(event_type: str, data: dict[str, Any]) -> None:
    return None


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool
    attempts: int
    pauses_run: bool = False  # the content is a question for a human, not a result
    degraded: bool = False  # the tool is withdrawn for the rest of the run
    waiting_for: WaitingFor | None = None  # what a pausing call waits on (an approval)
    # A person (or the approval's expiry policy) refused the call: an error result, but
    # not the model's error (the `too_many_errors` terminator leaves it out).
    declined: bool = False


@dataclass(frozen=True)
class _Tried:
    """What one tool's attempts came to: its answer, or the error for the model."""

    tool: Tool
    attempts: int
    content: str | None = None
    error: str | None = None  # "Error: …", as the model would read it
    refused: bool = False  # the breaker was open: the tool was not called (again)


@dataclass
class ToolRunner:
    registry: ToolRegistry
    policy: ToolRetryPolicy
    sleep: Sleep = asyncio.sleep
    rng: random.Random = random.Random()  # noqa: RUF009 - one shared stream of jitter
    breakers: Breakers = field(default_factory=Breakers)

    async def run(
        self,
        call: ToolUseBlock,
        context: ToolContext,
        *,
        allowed: Collection[str],
        on_retry: OnRetry,
        on_event: OnEvent = _no_event,
        unavailable: Collection[str] = (),
    ) -> ToolOutcome:
        """`allowed`: the agent's tools; `unavailable`: tools degraded earlier in the run.
        `on_retry` receives `agent.tool.retry` data; `on_event` the ladder's other events
        (`agent.tool.fallback`, `agent.tool.degraded`, `agent.breaker.opened/closed`). When
        tracing, the call is an `execute_tool` span, and those events are its events."""
        with spans.execute_tool(call.name, call.id) as span:
            outcome = await self._ladder(
                call,
                context,
                allowed=allowed,
                on_retry=spans.with_event("agent.tool.retry", on_retry),
                on_event=spans.with_events(on_event),
                unavailable=unavailable,
            )
            span.result(outcome.is_error, outcome.content, outcome.attempts)
        return outcome

    async def _ladder(
        self,
        call: ToolUseBlock,
        context: ToolContext,
        *,
        allowed: Collection[str],
        on_retry: OnRetry,
        on_event: OnEvent,
        unavailable: Collection[str],
    ) -> ToolOutcome:
        """The call up the escalation ladder (the module's docstring)."""
        tool = self.registry.get(call.name)
        if tool is None:
            return ToolOutcome(f"Error: unknown tool {call.name!r}", True, 0)
        unparsed = unparsed_arguments(call)
        if unparsed is not None:
            return ToolOutcome(_not_json(call.name, unparsed), True, 0)
        if call.name in unavailable:
            return ToolOutcome(_withdrawn(call.name), True, 0, degraded=True)
        if tool.requires_permission and call.name not in allowed:
            return ToolOutcome(
                f"Error: permission denied: this agent may not use {call.name!r}", True, 0
            )
        tried = await self._attempt(tool, call, context, on_retry, on_event)
        if tried.content is not None:
            return ToolOutcome(tried.content, False, tried.attempts, pauses_run=tool.pauses_run)
        attempts, error = tried.attempts, tried.error or "Error: no result"
        fallback = self._fallback(tool, allowed, unavailable)
        if fallback is not None:
            await on_event(
                "agent.tool.fallback",
                {
                    "tool_call_id": call.id,
                    "tool": tool.name,
                    "fallback": fallback.name,
                    "reason": "breaker_open" if tried.refused else "failed",
                    "error": tried.error,
                },
            )
            second = await self._attempt(fallback, call, context, on_retry, on_event)
            attempts += second.attempts
            if second.content is not None:
                note = f"[{tool.name} failed; this result comes from {fallback.name}]\n"
                return ToolOutcome(
                    note + second.content, False, attempts, pauses_run=fallback.pauses_run
                )
            error = (
                f"Error: {tool.name!r} failed ({_plain(tried.error)}), and so did its fallback "
                f"{fallback.name!r} ({_plain(second.error)})"
            )
        if tool.optional:
            await on_event(
                "agent.tool.degraded", {"tool_call_id": call.id, "tool": tool.name, "error": error}
            )
            content = f"{_withdrawn(tool.name)} (Last error: {_plain(error)})"
            return ToolOutcome(content, True, attempts, degraded=True)
        return ToolOutcome(error, True, attempts)

    def _fallback(
        self, tool: Tool, allowed: Collection[str], unavailable: Collection[str]
    ) -> Tool | None:
        """The declared fallback, if it exists and this agent may use it (a fallback gets
        no more permission than a call to it by name would)."""
        if tool.fallback is None or tool.fallback in unavailable:
            return None
        fallback = self.registry.get(tool.fallback)
        if fallback is None or fallback.name == tool.name:
            return None
        if fallback.requires_permission and fallback.name not in allowed:
            return None
        return fallback

    async def _attempt(
        self,
        tool: Tool,
        call: ToolUseBlock,
        context: ToolContext,
        on_retry: OnRetry,
        on_event: OnEvent,
    ) -> _Tried:
        """Rung one: call the tool, retrying what may be retried, while its breaker lets us."""
        breaker = self.breakers.get(tool.breaker_name(call.input))
        attempts = 0
        while True:
            if not breaker.allow():
                error = (
                    f"Error: {tool.name!r} is unavailable: its circuit breaker is open "
                    f"(next try in {breaker.retry_in_s:.0f} s)"
                )
                return _Tried(tool, attempts, error=error, refused=True)
            attempts += 1
            try:
                content = await tool.handler(context, call.input)
            except asyncio.CancelledError:
                raise
            except ToolFailure as failure:
                # A permanent failure is the tool answering: it says nothing against its health.
                await _record(breaker, failed=failure.transient, on_event=on_event)
                retryable = failure.transient and tool.retries and tool.may_send_again(call.input)
                # No retry into a breaker this failure just opened: the ladder moves on.
                if (
                    retryable
                    and attempts <= self.policy.max_retries
                    and breaker.state is not BreakerState.OPEN
                ):
                    delay = tool_retry_delay(self.policy, attempts, self.rng)
                    await on_retry(
                        {
                            "tool_call_id": call.id,
                            "tool": tool.name,
                            "attempt": attempts,
                            "delay_s": round(delay, 3),
                            "error": sanitize(failure.message),
                        }
                    )
                    await self.sleep(delay)
                    continue
                return _Tried(tool, attempts, error=f"Error: {sanitize(failure.message)}")
            except Exception as exc:
                log.warning("tool %s failed", tool.name, exc_info=True)
                await _record(breaker, failed=True, on_event=on_event)
                message = sanitize(f"{type(exc).__name__}: {exc}")
                return _Tried(tool, attempts, error=f"Error executing {tool.name}: {message}")
            await _record(breaker, failed=False, on_event=on_event)
            return _Tried(tool, attempts, content=content)


async def _record(breaker: CircuitBreaker, *, failed: bool, on_event: OnEvent) -> None:
    event = breaker_event(breaker, breaker.record(failed=failed))
    if event is not None:
        await on_event(*event)


def _plain(error: str | None) -> str:
    return (error or "no result").removeprefix("Error: ")


def _withdrawn(name: str) -> str:
    return f"Error: the tool {name!r} is unavailable for the rest of this run; continue without it."


def aborted(call: ToolUseBlock) -> ToolOutcome:
    """The result recorded for a call that was stopped before it finished."""
    return ToolOutcome(f"Error: the call to {call.name!r} was aborted", True, 1)


def _not_json(name: str, arguments: str) -> str:
    shown = arguments if len(arguments) <= 500 else arguments[:500] + "…"
    return (
        f"Error: the arguments of this {name!r} call are not a JSON object, so it did not "
        f"run: {shown!r}. Call it again with its arguments as one JSON object."
    )
