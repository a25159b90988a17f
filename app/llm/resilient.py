"""`ResilientModel`: one logical LLM call made resilient: retries as `app/llm/policy.py`
classifies, a circuit breaker per model, a fallback model (on the same provider or
another), adaptive `max_tokens`, one credentials refresh, and persistent retry mode for
unattended runs. Providers never retry on their own; this is the one place that does.

    breaker open? ──▶ fallback model; else fail at once (persistent mode: wait for its probe)
    attempt ──▶ ok: return
            └─▶ error: classify ─▶ auth: refresh once, again at once
                                 ─▶ overflow: shrink max_tokens, again at once
                                 ─▶ N overloads in a row: fallback model, again at once
                                 ─▶ retryable and budget left: wait (backoff/retry-after)
                                 ─▶ otherwise: LLMCallFailed

Persistent mode (unattended runs) has no attempt limit, only a cap on the whole call's
time; its waits are slept in chunks with `heartbeat()` between them (which may raise to
stop waiting, e.g. when the run's lease is lost or it was cancelled).

Text deltas of an attempt that fails mid-stream have already reached `on_text`; the
`agent.llm.retry` event tells listeners that the answer starts over.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from app.core.breakers import Breakers, BreakerState, CircuitBreaker, breaker_event
from app.core.sanitize import sanitize
from app.llm.policy import (
    FOREGROUND_PURPOSES,
    LLMRetryPolicy,
    Purpose,
    backoff_delay,
    classify,
    retry_after_s,
)
from app.llm.provider import (
    LLMRequest,
    LLMResponse,
    Provider,
    ProviderError,
    TextSink,
    UsageSink,
)

OnEvent = Callable[[str, dict[str, Any]], Awaitable[None]]
Callback = Callable[[], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]


async def _no_event(event_type: str, data: dict[str, Any]) -> None:
    return None


def _utc_now() -> datetime:
    return datetime.now(UTC)


class LLMCallFailed(Exception):
    """A logical LLM call gave up: which call, the last provider error (None if no attempt
    was made), its class (or `circuit_open`, `persistent_cap`) and the attempts made."""

    def __init__(
        self, operation: str, last_error: ProviderError | None, error_class: str, attempts: int
    ) -> None:
        self.operation = operation
        self.last_error = last_error
        self.error_class = error_class
        self.attempts = attempts
        cause = sanitize(last_error.message) if last_error else "no attempt was made"
        super().__init__(f"{operation} failed after {attempts} attempt(s) [{error_class}]: {cause}")


@dataclass(frozen=True)
class Route:
    """Where an attempt goes: a model of a provider (by the provider's name), on `server`
    (a model's own base URL; None: its provider's settings'). Its breaker is
    `provider:<provider>:<model>`, with `@<host:port>` for a server of its own (one
    failing local server must not open the breaker of the same model on another); its
    calls are priced as that provider's model."""

    provider: str
    model: str
    server: str | None = None

    @property
    def breaker_name(self) -> str:
        name = f"provider:{self.provider}:{self.model}"
        return name if self.server is None else f"{name}@{_host(self.server)}"


def _host(base_url: str) -> str:
    """A base URL's `host:port` (its path is one server's API root, not another server)."""
    return urlsplit(base_url).netloc or base_url


@dataclass
class ResilientModel:
    """Calls a provider's model with retries, breakers, fallback and adaptive
    `max_tokens`, as the module docstring draws. Made per run (or per background job):
    `provider_for` maps a route to its provider, `provider_name` is the provider of the
    model the request names, `fallback` the route tried instead, and the callbacks reach
    the run. `attempting` is the route of the call's latest attempt (None before the
    first): the one that answered, or was cut short."""

    provider_for: Callable[[Route], Provider]
    provider_name: str
    breakers: Breakers
    server: str | None = None  # the model's own base URL, if it has one
    policy: LLMRetryPolicy = field(default_factory=LLMRetryPolicy)
    fallback: Route | None = None
    persistent: bool = False
    on_event: OnEvent = _no_event
    # After a refused key, once per call: fetch the route's credentials again; False when
    # its provider cannot (the call then fails at once).
    refresh_credentials: Callable[[Route], Awaitable[bool]] | None = None
    heartbeat: Callback | None = None  # awaited between the chunks of a persistent wait
    # Told of each chunk of a persistent wait once it is waited out: the run does not
    # charge that time to its time limits.
    waited: Callable[[float], None] | None = None
    sleep: Sleep = asyncio.sleep
    rng: random.Random = field(default_factory=random.Random)
    clock: Callable[[], datetime] = _utc_now
    attempting: Route | None = field(default=None, init=False)

    def for_purpose(self, purpose: Purpose) -> Provider:
        """This model as a plain provider making calls of one purpose (a background
        summariser takes it, and fails fast under load)."""
        return _PurposeBound(self, purpose)

    def breaker(self, route: Route) -> CircuitBreaker:
        return self.breakers.get(route.breaker_name)

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
        *,
        purpose: Purpose,
    ) -> LLMResponse:
        """The response of the first attempt that succeeds; LLMCallFailed when giving up."""
        foreground = purpose in FOREGROUND_PURPOSES
        started = self.clock()
        attempts = on_model = overloads = 0
        refreshed = False
        last: ProviderError | None = None
        route = Route(self.provider_name, request.model, self.server)
        self.attempting = None

        def failed(error_class: str) -> LLMCallFailed:
            operation = f"LLM call ({purpose}, model {request.model})"
            return LLMCallFailed(operation, last, error_class, attempts)

        while True:
            breaker = self.breaker(route)
            if not breaker.allow():
                if self._can_fall_back(route):
                    route, request = await self._fall_back(route, request, "breaker_open")
                    on_model = overloads = 0
                    continue
                if not self.persistent:
                    raise failed("circuit_open")
                # Unattended: an open breaker is one more outage to wait out, until its
                # probe is due (or, while another caller probes, for one chunk).
                delay = breaker.retry_in_s or self.policy.persistent_chunk_s
                if self._past_cap(started, delay):
                    raise failed("persistent_cap")
                await self._announce_retry(request, purpose, "circuit_open", last, on_model, delay)
                await self._wait(delay)
                continue
            attempts += 1
            on_model += 1
            self.attempting = route
            try:
                response = await self.provider_for(route).complete(request, on_text, on_usage)
            except ProviderError as error:
                last = error
                decision = classify(
                    error, foreground=foreground, min_output_tokens=self.policy.min_output_tokens
                )
                await self._record(breaker, failed=decision.service_fault)
            else:
                await self._record(breaker, failed=False)
                return response

            if decision.refresh_credentials:
                if (
                    refreshed
                    or self.refresh_credentials is None
                    or not await self.refresh_credentials(route)
                ):
                    raise failed(decision.error_class)
                refreshed = True
                await self.on_event("agent.llm.credentials_refreshed", {"model": request.model})
                continue
            if decision.max_tokens is not None:
                if decision.max_tokens >= request.max_tokens:  # shrinking did not help
                    raise failed(decision.error_class)
                adjusted = {"model": request.model, "from": request.max_tokens}
                request = replace(request, max_tokens=decision.max_tokens)
                await self.on_event(
                    "agent.llm.max_tokens_adjusted", {**adjusted, "to": request.max_tokens}
                )
                continue
            if not decision.retry:
                raise failed(decision.error_class)
            overloads = overloads + 1 if decision.error_class == "overloaded" else 0
            if overloads >= self.policy.overloads_before_fallback and self._can_fall_back(route):
                route, request = await self._fall_back(
                    route, request, "overloaded", overloads=overloads
                )
                on_model = overloads = 0
                continue
            opened = breaker.state is BreakerState.OPEN  # this failure opened it
            if opened and (self._can_fall_back(route) or not self.persistent):
                continue  # no use waiting: the top of the loop falls back or gives up
            if not self.persistent and on_model >= self.policy.max_attempts:
                raise failed(decision.error_class)
            delay = backoff_delay(
                on_model,
                self.rng,
                retry_after_s=retry_after_s(last.headers, now=self.clock()),
                persistent=self.persistent,
                policy=self.policy,
            )
            if opened:
                delay = max(delay, breaker.retry_in_s)
            if self._past_cap(started, delay):
                raise failed("persistent_cap")
            await self._announce_retry(
                request, purpose, decision.error_class, last, on_model, delay
            )
            await self._wait(delay)

    def _can_fall_back(self, route: Route) -> bool:
        return self.fallback is not None and route != self.fallback

    async def _fall_back(
        self, route: Route, request: LLMRequest, reason: str, **detail: Any
    ) -> tuple[Route, LLMRequest]:
        fallback = self.fallback
        assert fallback is not None
        data = {
            "from_model": route.model,
            "to_model": fallback.model,
            "from_provider": route.provider,
            "to_provider": fallback.provider,
            "reason": reason,
        }
        await self.on_event("agent.llm.fallback", {**data, **detail})
        return fallback, replace(request, model=fallback.model)

    async def _record(self, breaker: CircuitBreaker, *, failed: bool) -> None:
        event = breaker_event(breaker, breaker.record(failed=failed))
        if event is not None:
            await self.on_event(*event)

    def _past_cap(self, started: datetime, delay: float) -> bool:
        """Whether waiting `delay` more would pass persistent mode's cap on the whole call."""
        elapsed = (self.clock() - started).total_seconds()
        return self.persistent and elapsed + delay > self.policy.persistent_cap_s

    async def _announce_retry(
        self,
        request: LLMRequest,
        purpose: Purpose,
        error_class: str,
        error: ProviderError | None,
        attempt: int,
        delay: float,
    ) -> None:
        await self.on_event(
            "agent.llm.retry",
            {
                "purpose": purpose,
                "model": request.model,
                "class": error_class,
                "http_status": error.status if error else None,
                "attempt": attempt,
                "delay_s": round(delay, 3),
                "error": sanitize(error.message) if error else None,
            },
        )

    async def _wait(self, delay: float) -> None:
        """Sleep; in persistent mode in chunks with a heartbeat between them, so that a long
        wait does not look like a dead run."""
        if not self.persistent:
            await self.sleep(delay)
            return
        remaining = delay
        while remaining > 0:
            chunk = min(self.policy.persistent_chunk_s, remaining)
            await self.sleep(chunk)
            remaining -= chunk
            if self.waited is not None:
                self.waited(chunk)
            if remaining > 0 and self.heartbeat is not None:
                await self.heartbeat()


@dataclass(frozen=True)
class _PurposeBound:
    model: ResilientModel
    purpose: Purpose

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        return await self.model.complete(request, on_text, on_usage, purpose=self.purpose)
