"""How deliveries are sent and retried, as data: attempts, backoff, time-outs, the lease,
and the address policy of their URLs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from app.core.addresses import IPNetwork, parse_networks
from app.core.config import WebhookSettings


@dataclass(frozen=True)
class DeliveryPolicy:
    max_attempts: int = 5  # per round: the first send, or a redeliver, and its retries
    backoff_base_s: float = 15.0
    backoff_factor: float = 2.0
    timeout_s: float = 10.0  # one attempt: resolve, connect, send, read the answer
    lease_s: float = 60.0  # a claim holds a delivery this long; longer than timeout_s
    concurrency: int = 4
    excerpt_chars: int = 1_000
    allow_private: bool = False
    allowed_networks: tuple[str, ...] = ()
    networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.backoff_base_s < 0 or self.backoff_factor < 1:
            raise ValueError("backoff_base_s must not be negative, backoff_factor at least 1")
        if not 0 < self.timeout_s < self.lease_s:
            raise ValueError("timeout_s must be positive and shorter than lease_s")
        if self.concurrency < 1 or self.excerpt_chars < 0:
            raise ValueError("concurrency must be at least 1, excerpt_chars not negative")
        object.__setattr__(self, "allowed_networks", tuple(self.allowed_networks))
        object.__setattr__(self, "networks", parse_networks(self.allowed_networks))

    @classmethod
    def from_settings(cls, settings: WebhookSettings) -> DeliveryPolicy:
        return cls(
            max_attempts=settings.max_attempts,
            backoff_base_s=settings.backoff_base_s,
            backoff_factor=settings.backoff_factor,
            timeout_s=settings.timeout_s,
            lease_s=settings.lease_s,
            concurrency=settings.concurrency,
            excerpt_chars=settings.response_excerpt_chars,
            allow_private=settings.allow_private,
            allowed_networks=tuple(settings.allowed_networks),
        )

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.lease_s)


def retry_delay(policy: DeliveryPolicy, attempt: int) -> timedelta | None:
    """How long after failed attempt `attempt` (1-based, counted since the latest
    redeliver) the next one waits: base * factor^(attempt-1); None when it was the last."""
    if attempt >= policy.max_attempts:
        return None
    return timedelta(seconds=policy.backoff_base_s * policy.backoff_factor ** (attempt - 1))
