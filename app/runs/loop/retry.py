"""Retry policies as data, and the pure functions that space attempts and decide what a
failed run becomes."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.core.states import RunStatus
from app.core.streams import StreamEvent
from app.core.vocabulary import StepKind
from app.runs.schemas.runs import ErrorLogEntry, RunRead, logged


@dataclass(frozen=True)
class ToolRetryPolicy:
    """Transient failures of idempotent tools are retried after
    0.5 s, 2 s and 8 s, with up to 25 % jitter, then the error goes to the model."""

    delays_s: tuple[float, ...] = (0.5, 2.0, 8.0)
    jitter_ratio: float = 0.25

    def __post_init__(self) -> None:
        if any(d < 0 for d in self.delays_s) or not 0 <= self.jitter_ratio <= 1:
            raise ValueError("delays must be non-negative and jitter between 0 and 1")

    @property
    def max_retries(self) -> int:
        return len(self.delays_s)


def tool_retry_delay(policy: ToolRetryPolicy, retry: int, rng: random.Random) -> float:
    """Seconds to wait before retry number `retry` (1-based)."""
    base = policy.delays_s[retry - 1]
    return base + base * policy.jitter_ratio * rng.random()


@dataclass(frozen=True)
class RunRetryPolicy:
    """A failed run is retried after base * factor^n seconds (30 s, 60 s, … for
    base 15 s, factor 2), at most `max_retries` times, then it goes to dead_letter."""

    base_delay_s: float = 15.0
    factor: float = 2.0
    max_retries: int = 5

    def __post_init__(self) -> None:
        if self.base_delay_s < 0 or self.factor < 1 or self.max_retries < 0:
            raise ValueError("need base_delay_s >= 0, factor >= 1, max_retries >= 0")


def run_retry_delay(policy: RunRetryPolicy, retry: int) -> float:
    """Seconds before retry number `retry` (1-based)."""
    return float(policy.base_delay_s * policy.factor**retry)


@dataclass(frozen=True)
class FailedRun:
    """What a failure makes of a run: columns to write, its events in order, and the kind
    of step that closes it (a `note`, not a resume point, while it will be retried)."""

    values: dict[str, Any]
    events: list[StreamEvent]
    checkpoint: StepKind


def after_failure(
    policy: RunRetryPolicy,
    run: RunRead,
    error: dict[str, Any],
    failed: dict[str, Any],
    now: datetime,
    *,
    retryable: bool = True,
) -> FailedRun:
    """A failure goes to the run's error log, then the run is retried after a
    backoff (back to the queue, keeping its place in its lane) or, once its retries are
    used up, dead-lettered. Without retries configured, or for a failure no later attempt
    can fix (`retryable=False`: a refused request), it stays failed."""
    entry = ErrorLogEntry(attempt=run.attempt, code=error["code"], message=error["message"], at=now)
    values: dict[str, Any] = {"error_log": logged(run, entry)}
    failure: StreamEvent = ("agent_run.failed", failed)
    if policy.max_retries == 0 or not retryable:
        return FailedRun(values, [failure], StepKind.FINAL)
    if run.attempt <= policy.max_retries:
        delay_s = run_retry_delay(policy, run.attempt)
        values.update(
            status=RunStatus.QUEUED,
            attempt=run.attempt + 1,
            not_before=now + timedelta(seconds=delay_s),
            finished_at=None,
        )
        retry = {"attempt": run.attempt + 1, "delay_s": delay_s}
        return FailedRun(values, [failure, ("agent_run.retry_scheduled", retry)], StepKind.NOTE)
    values["status"] = RunStatus.DEAD_LETTER
    dead = ("agent_run.dead_letter", {"attempts": run.attempt})
    return FailedRun(values, [failure, dead], StepKind.FINAL)
