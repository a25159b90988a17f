"""The LLM call policy as data and pure functions: which provider errors are worth
another attempt, for whom, after how long. It reads only the neutral fields of a
`ProviderError` (class, overflow counts, the server's verdict, `retry-after`), never a
vendor's wording. `app/llm/resilient.py` applies it."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Literal

from app.core.config import ResilienceSettings
from app.llm.provider import REFUSED, TRANSIENT, ErrorClass, Overflow, ProviderError

# Who waits for a call. Only a person (or a coordinator a person waits on) justifies
# retrying into a capacity event; everything else fails fast so as not to amplify it.
Purpose = Literal[
    "main_loop", "user_request", "coordinator", "compaction_summary", "title", "scoring"
]
FOREGROUND_PURPOSES: frozenset[Purpose] = frozenset({"main_loop", "user_request", "coordinator"})

# Capacity errors: retried only when someone waits on the call.
CAPACITY: frozenset[ErrorClass] = frozenset({"rate_limited", "overloaded"})
# Errors that say something about the service's health, and so count against its breaker.
# The others (a bad request, a refused key) prove the service is up and answering.
SERVICE_FAULTS: frozenset[ErrorClass] = CAPACITY | TRANSIENT
# Failures no later attempt of the same request can fix (a refused key, once refreshed,
# included), so a run that meets one is not retried with backoff either.
PERMANENT_FAILURES: frozenset[str] = frozenset({"context_overflow", "auth", *REFUSED})
_TRANSIENT_REASONS: dict[ErrorClass, str] = {
    "timeout": "no answer in time; the service may recover",
    "connection": "the connection failed; a new one may not",
}


@dataclass(frozen=True)
class LLMRetryPolicy:
    """How hard one logical LLM call tries. Delays grow `base_delay_s * 2^(n-1)` up to
    `max_delay_s`, plus up to `jitter_ratio` of themselves; a server's `retry-after` replaces
    the formula, up to `retry_after_cap_s`. Persistent mode (unattended runs) drops the
    attempt limit for a time cap, and sleeps long waits in chunks that heartbeat."""

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 32.0
    jitter_ratio: float = 0.25
    retry_after_cap_s: float = 60.0
    overloads_before_fallback: int = 3
    min_output_tokens: int = 3_000
    persistent_cap_s: float = 6 * 3600.0
    persistent_chunk_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.overloads_before_fallback < 1:
            raise ValueError("need max_attempts >= 1 and overloads_before_fallback >= 1")
        if min(self.base_delay_s, self.max_delay_s, self.retry_after_cap_s) < 0:
            raise ValueError("delays must be non-negative")
        if not 0 <= self.jitter_ratio <= 1:
            raise ValueError("jitter_ratio must be between 0 and 1")
        if self.persistent_cap_s <= 0 or self.persistent_chunk_s <= 0:
            raise ValueError("persistent_cap_s and persistent_chunk_s must be positive")

    @classmethod
    def from_settings(cls, settings: ResilienceSettings) -> LLMRetryPolicy:
        return cls(
            max_attempts=settings.llm_max_attempts,
            max_delay_s=settings.llm_max_delay_s,
            retry_after_cap_s=settings.llm_retry_after_cap_s,
            overloads_before_fallback=settings.llm_overloads_before_fallback,
            persistent_cap_s=settings.llm_persistent_cap_s,
            persistent_chunk_s=settings.llm_persistent_chunk_s,
        )


@dataclass(frozen=True)
class RetryDecision:
    """What to do about one failed attempt. `max_tokens` is set when the request can be
    fixed by asking for a shorter answer; `refresh_credentials` when a fresh key may help."""

    error_class: ErrorClass
    retry: bool
    reason: str
    max_tokens: int | None = None
    refresh_credentials: bool = False

    @property
    def service_fault(self) -> bool:
        return self.error_class in SERVICE_FAULTS


def classify(
    error: ProviderError, *, foreground: bool, min_output_tokens: int = 3_000
) -> RetryDecision:
    """The decision for one failed attempt. Transport failures and the service's transient
    faults are retried; capacity errors only when someone waits on the call; a refused key
    once, with fresh credentials; a context overflow at once with a smaller `max_tokens`
    when enough room is left; a refused request never. The server's own verdict on
    retrying overrides that both ways, except that a background call never retries a
    capacity error: that rule protects the service."""
    decision = _by_class(error, foreground, min_output_tokens)
    if error.should_retry is False and decision.retry:
        return RetryDecision(decision.error_class, False, "the server said not to retry")
    if error.should_retry is True and not decision.retry:
        if decision.error_class in CAPACITY and not foreground:
            return decision
        return RetryDecision(decision.error_class, True, "the server asked for a retry")
    return decision


def _by_class(error: ProviderError, foreground: bool, floor: int) -> RetryDecision:
    error_class = error.error_class
    if error_class == "context_overflow":
        return _overflow(error.overflow, floor)
    if error_class == "auth":
        return RetryDecision("auth", True, "the key may be stale", refresh_credentials=True)
    if error_class in CAPACITY:
        if foreground:
            return RetryDecision(error_class, True, "capacity: someone is waiting on this call")
        return RetryDecision(error_class, False, "capacity: a background call fails fast")
    if error_class in TRANSIENT:
        reason = _TRANSIENT_REASONS.get(error_class, "transient on the service's side")
        return RetryDecision(error_class, True, reason)
    return RetryDecision(error_class, False, "the request itself was refused")


def _overflow(overflow: Overflow | None, floor: int) -> RetryDecision:
    """Retry with the room the window leaves for the answer, if it is at least `floor`."""
    if overflow is None or overflow.input_tokens is None or overflow.context_window is None:
        reason = "context overflow: the service did not say how much room is left"
        return RetryDecision("context_overflow", False, reason)
    available = overflow.context_window - overflow.input_tokens
    if available <= 0:
        return RetryDecision("context_overflow", False, "the input alone exceeds the window")
    if available >= floor:
        reason = f"context overflow: {available} tokens left for the answer"
        return RetryDecision("context_overflow", True, reason, max_tokens=available)
    reason = f"context overflow: only {available} tokens left for the answer (< {floor})"
    return RetryDecision("context_overflow", False, reason)


def retry_after_s(headers: dict[str, str], *, now: datetime) -> float | None:
    """The server's requested wait: `retry-after-ms`, else `retry-after` in seconds or as an
    HTTP date. None when absent or unreadable; never negative."""
    if "retry-after-ms" in headers:
        try:
            return _non_negative(float(headers["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return _non_negative(float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - now).total_seconds())


def _non_negative(seconds: float) -> float | None:
    return max(0.0, seconds) if math.isfinite(seconds) else None


def backoff_delay(
    attempt: int,
    rng: random.Random,
    *,
    retry_after_s: float | None = None,
    persistent: bool = False,
    policy: LLMRetryPolicy = LLMRetryPolicy(),
) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based). A server's
    `retry-after` wins, capped; in persistent mode only by the whole session's cap, since
    waiting out a long outage is what that mode is for."""
    if retry_after_s is not None:
        cap = policy.persistent_cap_s if persistent else policy.retry_after_cap_s
        return min(retry_after_s, cap)
    base = min(policy.base_delay_s * 2.0 ** (attempt - 1), policy.max_delay_s)
    return base + base * policy.jitter_ratio * rng.random()
