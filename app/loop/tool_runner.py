"""Runs one tool call through the error pipeline of seed 001: an unknown tool, an aborted
call, a permission denied and a failed execution each become an error result for the
model, never an exception that would leave a `tool_use` unanswered. Transient failures of
idempotent, retryable tools are retried with backoff first."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

from app.engine.retry import ToolRetryPolicy, tool_retry_delay
from app.llm.messages import ToolUseBlock
from app.loop.tools.base import ToolContext, ToolFailure
from app.loop.tools.registry import ToolRegistry
from app.sanitize import sanitize

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
OnRetry = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool
    attempts: int
    pauses_run: bool = False  # the content is a question for a human, not a result


@dataclass
class ToolRunner:
    registry: ToolRegistry
    policy: ToolRetryPolicy
    sleep: Sleep = asyncio.sleep
    rng: random.Random = random.Random()  # noqa: RUF009 - one shared stream of jitter

    async def run(
        self,
        call: ToolUseBlock,
        context: ToolContext,
        *,
        allowed: Collection[str],
        on_retry: OnRetry,
    ) -> ToolOutcome:
        tool = self.registry.get(call.name)
        if tool is None:
            return ToolOutcome(f"Error: unknown tool {call.name!r}", True, 0)
        if tool.requires_permission and call.name not in allowed:
            return ToolOutcome(
                f"Error: permission denied: this agent may not use {call.name!r}", True, 0
            )
        attempts = 0
        while True:
            attempts += 1
            try:
                content = await tool.handler(context, call.input)
            except asyncio.CancelledError:
                raise
            except ToolFailure as failure:
                retryable = failure.transient and tool.retries and tool.is_idempotent(call.input)
                if retryable and attempts <= self.policy.max_retries:
                    delay = tool_retry_delay(self.policy, attempts, self.rng)
                    await on_retry(
                        {
                            "tool_call_id": call.id,
                            "tool": call.name,
                            "attempt": attempts,
                            "delay_s": round(delay, 3),
                            "error": sanitize(failure.message),
                        }
                    )
                    await self.sleep(delay)
                    continue
                return ToolOutcome(f"Error: {sanitize(failure.message)}", True, attempts)
            except Exception as exc:
                log.warning("tool %s failed", call.name, exc_info=True)
                message = sanitize(f"{type(exc).__name__}: {exc}")
                return ToolOutcome(f"Error executing {call.name}: {message}", True, attempts)
            return ToolOutcome(content, False, attempts, pauses_run=tool.pauses_run)


def aborted(call: ToolUseBlock) -> ToolOutcome:
    """The result recorded for a call that was stopped before it finished."""
    return ToolOutcome(f"Error: the call to {call.name!r} was aborted", True, 1)
