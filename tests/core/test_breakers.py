"""Circuit breakers as state machines, driven by an injected clock: closed → open when the
failure rate over the window reaches the threshold, open for a cooldown, then one probe
(half-open) that closes or re-opens it."""

from __future__ import annotations

import pytest

from app.core.breakers import (
    Breakers,
    BreakerState,
    CircuitBreaker,
    CircuitBreakerPolicy,
    breaker_event,
)
from app.core.config import ResilienceSettings

CLOSED, OPEN, HALF = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN
POLICY = CircuitBreakerPolicy(window_calls=4, min_calls=3, failure_rate=0.5, cooldown_s=10)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def breaker() -> tuple[CircuitBreaker, Clock]:
    clock = Clock()
    return CircuitBreaker("tool:search", POLICY, clock), clock


# Steps: "ok"/"fail" (allow, then record), "wait N" (advance the clock), "refused" (allow
# says no). Each step lists the state after it and the transition `record` reported.
Step = tuple[str, BreakerState, BreakerState | None]
SEQUENCES: dict[str, list[Step]] = {
    "too_few_calls_never_open": [("fail", CLOSED, None), ("fail", CLOSED, None)],
    "half_the_window_failing_opens": [
        ("ok", CLOSED, None),
        ("fail", CLOSED, None),
        ("fail", OPEN, OPEN),
        ("refused", OPEN, None),
    ],
    "successes_keep_the_rate_down": [
        ("fail", CLOSED, None),
        ("ok", CLOSED, None),
        ("ok", CLOSED, None),
        ("ok", CLOSED, None),
        ("fail", CLOSED, None),  # window: ok ok ok fail -> 25 %
        ("ok", CLOSED, None),
    ],
    "old_failures_slide_out_of_the_window": [
        ("fail", CLOSED, None),
        ("ok", CLOSED, None),
        ("ok", CLOSED, None),
        ("ok", CLOSED, None),
        ("ok", CLOSED, None),  # the first failure has left the window
        ("fail", CLOSED, None),  # window: ok ok ok fail
    ],
    "a_probe_that_succeeds_closes": [
        ("fail", CLOSED, None),
        ("fail", CLOSED, None),
        ("fail", OPEN, OPEN),
        ("wait 9.9", OPEN, None),
        ("refused", OPEN, None),
        ("wait 0.1", OPEN, None),
        ("ok", CLOSED, CLOSED),
        ("fail", CLOSED, None),  # a fresh window: one failure is not enough
    ],
    "a_probe_that_fails_reopens_for_a_new_cooldown": [
        ("fail", CLOSED, None),
        ("fail", CLOSED, None),
        ("fail", OPEN, OPEN),
        ("wait 10", OPEN, None),
        ("fail", OPEN, OPEN),
        ("wait 5", OPEN, None),
        ("refused", OPEN, None),
        ("wait 5", OPEN, None),
        ("ok", CLOSED, CLOSED),
    ],
}


@pytest.mark.parametrize("name", SEQUENCES)
def test_breaker_sequences(name: str) -> None:
    b, clock = breaker()
    for step, state, reported in SEQUENCES[name]:
        moved = None
        if step.startswith("wait"):
            clock.now += float(step.split()[1])
        elif step == "refused":
            assert not b.allow()
        else:
            assert b.allow()
            moved = b.record(failed=step == "fail")
        assert (b.state, moved) == (state, reported), step


def open_breaker() -> tuple[CircuitBreaker, Clock]:
    b, clock = breaker()
    for _ in range(3):
        assert b.allow()
        b.record(failed=True)
    assert b.state is OPEN
    return b, clock


def test_half_open_admits_exactly_one_probe() -> None:
    b, clock = open_breaker()
    clock.now += 10
    assert b.allow()
    assert b.state is HALF
    assert [b.allow() for _ in range(5)] == [False] * 5
    assert b.record(failed=False) is CLOSED
    assert all(b.allow() for _ in range(5))


def test_a_probe_that_never_reports_does_not_wedge_the_breaker() -> None:
    b, clock = open_breaker()
    clock.now += 10
    assert b.allow()  # the probe's caller is cancelled and never records
    clock.now += 9
    assert not b.allow()
    clock.now += 1
    assert b.allow()  # after one more cooldown, a new probe
    assert not b.allow()


def test_retry_in_counts_down_the_cooldown() -> None:
    b, clock = open_breaker()
    assert b.retry_in_s == 10
    clock.now += 4
    assert b.retry_in_s == 6
    clock.now += 6
    b.allow()
    assert b.retry_in_s == 0


def test_an_outcome_of_a_call_admitted_before_opening_changes_nothing() -> None:
    b, _ = breaker()
    admitted = [b.allow() for _ in range(4)]
    assert all(admitted)
    for _ in range(3):
        b.record(failed=True)
    assert b.state is OPEN
    assert b.record(failed=False) is None
    assert b.state is OPEN


def test_the_registry_keeps_one_breaker_per_name_and_snapshots_their_states() -> None:
    clock = Clock()
    breakers = Breakers(POLICY, clock)
    search = breakers.get("tool:search")
    assert breakers.get("tool:search") is search
    breakers.get("provider:anthropic:claude-x")
    for _ in range(3):
        search.record(failed=True)
    assert breakers.snapshot() == {"provider:anthropic:claude-x": "closed", "tool:search": "open"}


def test_transitions_become_events() -> None:
    b, _ = breaker()
    assert breaker_event(b, OPEN) == (
        "agent.breaker.opened",
        {"breaker": "tool:search", "cooldown_s": 10},
    )
    assert breaker_event(b, CLOSED) == ("agent.breaker.closed", {"breaker": "tool:search"})
    assert breaker_event(b, None) is None


def test_the_policy_comes_from_settings_and_refuses_nonsense() -> None:
    settings = ResilienceSettings(breaker_window_calls=50, breaker_cooldown_s=5)
    policy = CircuitBreakerPolicy.from_settings(settings)
    assert (policy.window_calls, policy.min_calls, policy.cooldown_s) == (50, 5, 5)
    with pytest.raises(ValueError, match="min_calls"):
        CircuitBreakerPolicy(window_calls=3, min_calls=4)
    with pytest.raises(ValueError, match="failure_rate"):
        CircuitBreakerPolicy(failure_rate=0)
    with pytest.raises(ValueError, match="breaker_min_calls"):
        ResilienceSettings(breaker_window_calls=3, breaker_min_calls=4)
