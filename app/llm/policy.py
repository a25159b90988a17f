"""The LLM call policy as data and pure functions (seed 001 "Retryability Classification",
"Query-Source Partitioning", "Production Considerations"): which provider errors are worth
another attempt, for whom, after how long. `app/llm/caller.py` applies it."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Literal

from app.core.config import ResilienceSettings
from app.llm.provider import ProviderError

# Who waits for a call. Only a person (or a coordinator a person waits on) justifies
# retrying into a capacity event; everything else fails fast so as not to amplify it.
Purpose = Literal[
    "main_loop", "user_request", "coordinator", "compaction_summary", "title", "scoring"
]
FOREGROUND_PURPOSES: frozenset[Purpose] = frozenset({"main_loop", "user_request", "coordinator"})

ErrorClass = Literal[
    "context_overflow",  # 400: input + max_tokens exceed the window (or the input alone does)
    "bad_request",  # 400, 413, 422 and any other 4xx not named below: the request is wrong
    "auth",  # 401: the key was refused; a credentials refresh is worth one more attempt
    "forbidden",  # 403
    "not_found",  # 404: e.g. an unknown model name
    "request_timeout",  # 408
    "conflict",  # 409: lock contention on their side
    "rate_limited",  # 429
    "overloaded",  # 529 (also an `overloaded_error` inside a stream)
    "server_error",  # other 5xx
    "timeout",  # nothing arrived in time
    "connection",  # refused, reset, or a stream cut short
]
# Errors that say something about the service's health, and so count against its breaker.
# The others (a bad request, a refused key) prove the service is up and answering.
SERVICE_FAULTS: frozenset[ErrorClass] = frozenset(
    {
        "request_timeout",
        "conflict",
        "rate_limited",
        "overloaded",
        "server_error",
        "timeout",
        "connection",
    }
)
CAPACITY: frozenset[ErrorClass] = frozenset({"rate_limited", "overloaded"})
# Failures no later attempt of the same request can fix: a run that meets one is not
# retried with backoff (seed 001: client errors are not retried).
PERMANENT_FAILURES: frozenset[str] = frozenset(
    {"context_overflow", "bad_request", "auth", "forbidden", "not_found"}
)

_CLASS_BY_STATUS: dict[int, ErrorClass] = {
    401: "auth",
    403: "forbidden",
    404: "not_found",
    408: "request_timeout",
    409: "conflict",
    429: "rate_limited",
    529: "overloaded",
}
# "input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000"
_OVERFLOW = re.compile(r"exceed context limit:\s*(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)")
_PROMPT_TOO_LONG = re.compile(r"prompt is too long", re.IGNORECASE)


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
    """Seed 001's table. A server's `x-should-retry` overrides it both ways, except that a
    background call never retries a capacity error: that rule protects the service."""
    if error.kind == "timeout":
        return RetryDecision("timeout", True, "no answer in time; the service may recover")
    if error.kind == "connection":
        return RetryDecision("connection", True, "the connection failed; a new one may not")
    decision = _by_status(error, foreground, min_output_tokens)
    directive = error.headers.get("x-should-retry", "").strip().lower()
    if directive == "false" and decision.retry:
        return RetryDecision(decision.error_class, False, "the server said not to retry")
    if directive == "true" and not decision.retry:
        if decision.error_class in CAPACITY and not foreground:
            return decision
        return RetryDecision(decision.error_class, True, "the server asked for a retry")
    return decision


def _by_status(error: ProviderError, foreground: bool, floor: int) -> RetryDecision:
    status = error.status or 500
    if status == 400:
        return _bad_request(error.message, floor)
    error_class = _CLASS_BY_STATUS.get(status) or (
        "server_error" if status >= 500 else "bad_request"
    )
    if error_class == "auth":
        return RetryDecision("auth", True, "the key may be stale", refresh_credentials=True)
    if error_class in CAPACITY:
        if foreground:
            return RetryDecision(error_class, True, "capacity: someone is waiting on this call")
        return RetryDecision(error_class, False, "capacity: a background call fails fast")
    if error_class in {"request_timeout", "conflict", "server_error"}:
        return RetryDecision(error_class, True, "transient on the service's side")
    return RetryDecision(error_class, False, "the request itself was refused")


def _bad_request(message: str, floor: int) -> RetryDecision:
    overflow = parse_context_overflow(message)
    if overflow is not None:
        input_tokens, _, limit = overflow
        available = limit - input_tokens
        if available >= floor:
            reason = f"context overflow: {available} tokens left for the answer"
            return RetryDecision("context_overflow", True, reason, max_tokens=available)
        reason = f"context overflow: only {available} tokens left for the answer (< {floor})"
        return RetryDecision("context_overflow", False, reason)
    if _PROMPT_TOO_LONG.search(message):
        return RetryDecision("context_overflow", False, "the input alone exceeds the window")
    return RetryDecision("bad_request", False, "the request is malformed")


def parse_context_overflow(message: str) -> tuple[int, int, int] | None:
    """(input tokens, requested max_tokens, context limit) from an overflow error's text."""
    match = _OVERFLOW.search(message)
    if match is None:
        return None
    input_tokens, max_tokens, limit = (int(g) for g in match.groups())
    return input_tokens, max_tokens, limit


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
