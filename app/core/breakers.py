"""Circuit breakers: stop calling a tool or a model that keeps
failing, for a cooldown, then let one probe call find out whether it has recovered.

    closed ──(failure rate ≥ threshold over the window)──▶ open
    open ──(cooldown elapsed; the next caller is the probe)──▶ half_open
    half_open ──(probe succeeds)──▶ closed      half_open ──(probe fails)──▶ open

Breakers live in the memory of one process, on purpose. A breaker protects this process
from spending its retry budget on a service known to be down; its state is advisory and
heals itself within one cooldown. Sharing it through Postgres would add a write to every
tool and model call for little gain: another replica learns of the same outage by itself
after `min_calls` calls, and a restart merely forgets what a cooldown would forgive.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from app.core.config import ResilienceSettings

Clock = Callable[[], float]  # seconds, monotonic


class BreakerState(StrEnum):
    CLOSED = "closed"  # calls go through; their outcomes fill the window
    OPEN = "open"  # calls are refused until the cooldown has passed
    HALF_OPEN = "half_open"  # one probe call is out; everyone else is refused until it ends


@dataclass(frozen=True)
class CircuitBreakerPolicy:
    """When a breaker opens: the failure rate over the last `window_calls` outcomes reaches
    `failure_rate` once at least `min_calls` of them are known. It stays open `cooldown_s`."""

    window_calls: int = 20
    min_calls: int = 5
    failure_rate: float = 0.5
    cooldown_s: float = 30.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_calls <= self.window_calls:
            raise ValueError("need 1 <= min_calls <= window_calls")
        if not 0 < self.failure_rate <= 1 or self.cooldown_s < 0:
            raise ValueError("need 0 < failure_rate <= 1 and cooldown_s >= 0")

    @classmethod
    def from_settings(cls, settings: ResilienceSettings) -> CircuitBreakerPolicy:
        return cls(
            window_calls=settings.breaker_window_calls,
            min_calls=settings.breaker_min_calls,
            failure_rate=settings.breaker_failure_rate,
            cooldown_s=settings.breaker_cooldown_s,
        )


@dataclass(frozen=True)
class BreakerReading:
    """A breaker as it stands: its state, the failures among the outcomes it holds (it
    opens when they reach its policy's rate), and, when open, the seconds until it lets a
    probe call through."""

    name: str
    state: BreakerState
    failures: int
    calls: int
    retry_in_s: float


@dataclass
class CircuitBreaker:
    """One service's breaker. `allow()` before a call; `record()` its outcome after. `record()`
    returns the state the breaker moved to, or None, so the caller can report it."""

    name: str
    policy: CircuitBreakerPolicy
    clock: Clock
    state: BreakerState = BreakerState.CLOSED
    _outcomes: deque[bool] = field(default_factory=deque)  # True: the call failed
    _opened_at: float = 0.0
    _probe_at: float | None = None

    def allow(self) -> bool:
        """Whether a call may go out now; once the cooldown has passed, the first caller to
        ask becomes the probe (half-open) and the others are refused until it reports."""
        now = self.clock()
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN:
            if now - self._opened_at < self.policy.cooldown_s:
                return False
            self.state = BreakerState.HALF_OPEN
        # A probe whose caller vanished (cancelled) without recording must not wedge the
        # breaker: after one more cooldown another caller may probe.
        elif self._probe_at is not None and now - self._probe_at < self.policy.cooldown_s:
            return False
        self._probe_at = now
        return True

    def record(self, *, failed: bool) -> BreakerState | None:
        """The outcome of a call that `allow()` admitted."""
        if self.state is BreakerState.HALF_OPEN:
            self._outcomes.clear()
            self._probe_at = None
            if failed:
                return self._open()
            self.state = BreakerState.CLOSED
            return BreakerState.CLOSED
        if self.state is BreakerState.OPEN:  # a call admitted before the breaker opened
            return None
        self._outcomes.append(failed)
        if len(self._outcomes) > self.policy.window_calls:
            self._outcomes.popleft()
        known = len(self._outcomes)
        if (
            known >= self.policy.min_calls
            and sum(self._outcomes) / known >= self.policy.failure_rate
        ):
            self._outcomes.clear()
            return self._open()
        return None

    @property
    def retry_in_s(self) -> float:
        """Seconds until an open breaker admits its probe (0 unless open)."""
        if self.state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self.policy.cooldown_s - (self.clock() - self._opened_at))

    def reading(self) -> BreakerReading:
        """The breaker as it stands now."""
        return BreakerReading(
            self.name, self.state, sum(self._outcomes), len(self._outcomes), self.retry_in_s
        )

    def _open(self) -> BreakerState:
        self.state, self._opened_at = BreakerState.OPEN, self.clock()
        return BreakerState.OPEN


class Breakers:
    """This process's breakers by name: `tool:<name>`, `provider:<provider>:<model>`."""

    def __init__(
        self, policy: CircuitBreakerPolicy | None = None, clock: Clock = time.monotonic
    ) -> None:
        self.policy = policy or CircuitBreakerPolicy()
        self._clock = clock
        self._breakers: dict[str, CircuitBreaker] = {}

    def get(self, name: str) -> CircuitBreaker:
        if name not in self._breakers:
            self._breakers[name] = CircuitBreaker(name, self.policy, self._clock)
        return self._breakers[name]

    def readings(self) -> list[BreakerReading]:
        """Every breaker as it stands, by name (the dashboard's overview shows them)."""
        return [breaker.reading() for _, breaker in sorted(self._breakers.items())]

    def snapshot(self) -> dict[str, str]:
        """Every breaker's state, for metrics and health pages."""
        return {reading.name: reading.state.value for reading in self.readings()}


def breaker_event(
    breaker: CircuitBreaker, moved_to: BreakerState | None
) -> tuple[str, dict[str, object]] | None:
    """The event a transition deserves: `agent.breaker.opened` or `agent.breaker.closed`
    (half-open is a passing state, visible in `snapshot()`)."""
    if moved_to is BreakerState.OPEN:
        return "agent.breaker.opened", {
            "breaker": breaker.name,
            "cooldown_s": breaker.policy.cooldown_s,
        }
    if moved_to is BreakerState.CLOSED:
        return "agent.breaker.closed", {"breaker": breaker.name}
    return None
