"""Retry policies as data, and the pure function that spaces attempts."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolRetryPolicy:
    """Seed 000 "Tool Retries": transient failures of idempotent tools are retried after
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
    """Seed 004: a failed run is retried after base * factor^n seconds (30 s, 60 s, … for
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
