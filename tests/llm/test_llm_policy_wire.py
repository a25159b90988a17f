"""ResilientModel with the real Anthropic provider against a real local server speaking
the Messages API: what is retried, after how long, with which model and `max_tokens` (as
the server received them). Sleep and clock are injected: nothing waits for real. The last
test drives the service's own `Providers` with a scripted model instead."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.agents.schemas import AgentRead
from app.core.breakers import Breakers, CircuitBreakerPolicy
from app.core.config import LLMSettings
from app.core.messages import Message, TextBlock
from app.core.model_config import ModelConfig, ScriptedFault, ScriptedTurn
from app.llm.policy import LLMRetryPolicy, Purpose
from app.llm.provider import LLMRequest, Provider
from app.llm.providers.anthropic.wire import AnthropicProvider
from app.llm.providers.registry import Providers
from app.llm.resilient import LLMCallFailed, ResilientModel, Route
from tests.support.anthropic_wire import (
    AnthropicWire,
    Drop,
    HttpError,
    Plan,
    Reply,
    StreamError,
    anthropic_wire,
)

PRIMARY = "claude-wire-primary"
FALLBACK = "claude-wire-fallback"
OVERLOADED = HttpError(529, "overloaded_error", "Overloaded")
ANSWER = Reply.text("All good.")


@dataclass
class Time:
    """The injected clock and sleep: sleeping moves the clock, and is recorded."""

    now: datetime = field(default_factory=lambda: datetime(2026, 11, 21, 12, 0, tzinfo=UTC))
    sleeps: list[float] = field(default_factory=list)

    def __call__(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += timedelta(seconds=seconds)


@dataclass
class Harness:
    wire: AnthropicWire
    provider: AnthropicProvider
    time: Time = field(default_factory=Time)
    breakers: Breakers = field(init=False)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    refreshes: int = 0
    heartbeats: int = 0

    def __post_init__(self) -> None:
        self.use_breakers(CircuitBreakerPolicy())

    def use_breakers(self, policy: CircuitBreakerPolicy) -> None:
        """Breakers on the test's clock, so that only injected sleeps age them."""
        self.breakers = Breakers(policy, clock=lambda: self.time.now.timestamp())

    def model(self, **options: Any) -> ResilientModel:
        async def on_event(event_type: str, data: dict[str, Any]) -> None:
            self.events.append((event_type, data))

        async def refresh(route: Route) -> bool:
            self.refreshes += 1
            return True

        async def heartbeat() -> None:
            self.heartbeats += 1

        options.setdefault("refresh_credentials", refresh)
        return ResilientModel(
            provider_for=lambda _route: self.provider,
            provider_name="anthropic",
            breakers=self.breakers,
            on_event=on_event,
            heartbeat=heartbeat,
            sleep=self.time.sleep,
            rng=random.Random(7),
            clock=self.time,
            **options,
        )

    async def ask(self, *plans: Plan, purpose: Purpose = "main_loop", **options: Any) -> str:
        self.wire.plan(*plans)
        request = LLMRequest(
            model=PRIMARY,
            system="",
            messages=[Message.user_text("Hello")],
            max_tokens=options.pop("max_tokens", 4_096),
        )
        response = await self.model(**options).complete(request, purpose=purpose)
        [block] = response.content
        assert isinstance(block, TextBlock)
        return block.text

    def received(self, key: str) -> list[Any]:
        return [r.body[key] for r in self.wire.requests]

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        return [data for kind, data in self.events if kind == event_type]


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    async with anthropic_wire() as wire, AnthropicProvider("sk-ant-test", base_url=wire.url) as p:
        yield Harness(wire, p)


async def test_a_429_waits_what_retry_after_says(h: Harness) -> None:
    limited = HttpError(429, "rate_limit_error", "Rate limited", {"retry-after": "7"})
    assert await h.ask(limited, ANSWER) == "All good."
    assert h.time.sleeps == [7.0]
    [retry] = h.of_type("agent.llm.retry")
    assert retry["class"] == "rate_limited"
    assert (retry["http_status"], retry["attempt"], retry["delay_s"]) == (429, 1, 7.0)
    assert len(h.wire.requests) == 2


async def test_an_overload_storm_is_ridden_out_by_the_foreground_with_backoff(h: Harness) -> None:
    assert await h.ask(OVERLOADED, OVERLOADED, OVERLOADED, ANSWER) == "All good."
    assert len(h.wire.requests) == 4
    for delay, base in zip(h.time.sleeps, [0.5, 1.0, 2.0], strict=True):
        assert base <= delay <= base * 1.25
    assert [r["attempt"] for r in h.of_type("agent.llm.retry")] == [1, 2, 3]


async def test_a_background_call_fails_fast_on_overload(h: Harness) -> None:
    with pytest.raises(LLMCallFailed) as failed:
        await h.ask(OVERLOADED, ANSWER, purpose="title")
    assert (failed.value.error_class, failed.value.attempts) == ("overloaded", 1)
    assert failed.value.last_error is not None and failed.value.last_error.status == 529
    assert "title" in str(failed.value) and PRIMARY in str(failed.value)
    assert len(h.wire.requests) == 1
    assert h.time.sleeps == []


async def test_a_background_call_fails_fast_on_an_overload_mid_stream(h: Harness) -> None:
    with pytest.raises(LLMCallFailed) as failed:
        await h.ask(StreamError(partial_text="Half an ans"), ANSWER, purpose="compaction_summary")
    assert failed.value.error_class == "overloaded"
    assert len(h.wire.requests) == 1


async def test_the_foreground_gives_up_after_its_attempts(h: Harness) -> None:
    with pytest.raises(LLMCallFailed) as failed:
        await h.ask(*[OVERLOADED] * 4, ANSWER)
    assert (failed.value.error_class, failed.value.attempts) == ("overloaded", 4)
    assert len(h.time.sleeps) == 3


async def test_consecutive_overloads_switch_to_the_fallback_model(h: Harness) -> None:
    policy = LLMRetryPolicy(overloads_before_fallback=2)
    answer = await h.ask(
        OVERLOADED, OVERLOADED, ANSWER, fallback=Route("anthropic", FALLBACK), policy=policy
    )
    assert answer == "All good."
    assert h.received("model") == [PRIMARY, PRIMARY, FALLBACK]
    assert len(h.time.sleeps) == 1  # the switch itself does not wait
    [switch] = h.of_type("agent.llm.fallback")
    assert switch == {
        "from_model": PRIMARY,
        "to_model": FALLBACK,
        "from_provider": "anthropic",
        "to_provider": "anthropic",
        "reason": "overloaded",
        "overloads": 2,
    }


async def test_a_context_overflow_is_retried_with_the_room_left(h: Harness) -> None:
    overflow = HttpError(
        400,
        "invalid_request_error",
        "input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000",
    )
    assert await h.ask(overflow, ANSWER, max_tokens=20_000) == "All good."
    assert h.received("max_tokens") == [20_000, 11_941]
    assert h.time.sleeps == []
    assert h.of_type("agent.llm.max_tokens_adjusted") == [
        {"model": PRIMARY, "from": 20_000, "to": 11_941}
    ]


async def test_an_overflow_leaving_too_little_room_fails(h: Harness) -> None:
    overflow = HttpError(
        400,
        "invalid_request_error",
        "input length and `max_tokens` exceed context limit: 198500 + 20000 > 200000",
    )
    with pytest.raises(LLMCallFailed) as failed:
        await h.ask(overflow, ANSWER, max_tokens=20_000)
    assert failed.value.error_class == "context_overflow"
    assert h.received("max_tokens") == [20_000]


async def test_x_should_retry_false_is_obeyed(h: Harness) -> None:
    refused = HttpError(503, "api_error", "Unavailable", {"x-should-retry": "false"})
    with pytest.raises(LLMCallFailed) as failed:
        await h.ask(refused, ANSWER)
    assert (failed.value.error_class, failed.value.attempts) == ("server_error", 1)
    assert len(h.wire.requests) == 1


async def test_a_dropped_connection_is_retried(h: Harness) -> None:
    assert await h.ask(Drop(partial_text="All go"), ANSWER) == "All good."
    assert len(h.wire.requests) == 2
    [retry] = h.of_type("agent.llm.retry")
    assert (retry["class"], retry["http_status"]) == ("connection", None)


async def test_a_401_refreshes_credentials_once(h: Harness) -> None:
    refused = HttpError(401, "authentication_error", "invalid x-api-key")
    assert await h.ask(refused, ANSWER) == "All good."
    assert h.refreshes == 1
    assert h.of_type("agent.llm.credentials_refreshed") == [{"model": PRIMARY}]

    with pytest.raises(LLMCallFailed) as failed:
        await h.ask(refused, refused, ANSWER)
    assert (failed.value.error_class, failed.value.attempts) == ("auth", 2)
    assert h.refreshes == 2  # one more, for the second call; not a third
    assert h.time.sleeps == []


async def test_a_401_without_a_way_to_refresh_fails_at_once(h: Harness) -> None:
    refused = HttpError(401, "authentication_error", "invalid x-api-key")
    with pytest.raises(LLMCallFailed):
        await h.ask(refused, ANSWER, refresh_credentials=None)
    assert len(h.wire.requests) == 1


async def test_an_open_breaker_sends_calls_straight_to_the_fallback(h: Harness) -> None:
    h.use_breakers(CircuitBreakerPolicy(window_calls=2, min_calls=2, cooldown_s=60))
    down = HttpError(500, "api_error", "Internal server error")
    assert await h.ask(down, down, ANSWER, fallback=Route("anthropic", FALLBACK)) == "All good."
    assert h.received("model") == [PRIMARY, PRIMARY, FALLBACK]
    assert len(h.time.sleeps) == 1  # no wait before the switch: the breaker had opened
    assert h.of_type("agent.breaker.opened") == [
        {"breaker": f"provider:anthropic:{PRIMARY}", "cooldown_s": 60}
    ]
    assert h.of_type("agent.llm.fallback")[0]["reason"] == "breaker_open"

    # The next call does not try the primary model at all while the breaker is open.
    assert await h.ask(ANSWER, fallback=Route("anthropic", FALLBACK)) == "All good."
    assert h.received("model")[3:] == [FALLBACK]
    assert h.breakers.snapshot() == {
        f"provider:anthropic:{FALLBACK}": "closed",
        f"provider:anthropic:{PRIMARY}": "open",
    }


async def test_an_open_breaker_without_a_fallback_fails_at_once(h: Harness) -> None:
    h.use_breakers(CircuitBreakerPolicy(window_calls=2, min_calls=2, cooldown_s=60))
    down = HttpError(500, "api_error", "Internal server error")
    with pytest.raises(LLMCallFailed) as failed:
        await h.ask(down, down, ANSWER)
    assert (failed.value.error_class, failed.value.attempts) == ("circuit_open", 2)
    with pytest.raises(LLMCallFailed) as again:
        await h.ask()
    assert (again.value.error_class, again.value.attempts) == ("circuit_open", 0)
    assert "no attempt was made" in str(again.value)
    assert len(h.wire.requests) == 2


async def test_after_the_cooldown_one_probe_closes_the_breaker(h: Harness) -> None:
    h.use_breakers(CircuitBreakerPolicy(window_calls=2, min_calls=2, cooldown_s=60))
    down = HttpError(500, "api_error", "Internal server error")
    with pytest.raises(LLMCallFailed):
        await h.ask(down, down)
    h.time.now += timedelta(seconds=60)
    assert await h.ask(ANSWER) == "All good."
    assert h.of_type("agent.breaker.closed") == [{"breaker": f"provider:anthropic:{PRIMARY}"}]


async def test_persistent_mode_waits_out_a_long_retry_after_in_heartbeating_chunks(
    h: Harness,
) -> None:
    limited = HttpError(429, "rate_limit_error", "Rate limited", {"retry-after": "95"})
    assert await h.ask(limited, ANSWER, persistent=True) == "All good."
    assert h.time.sleeps == [30.0, 30.0, 30.0, 5.0]
    assert h.heartbeats == 3


async def test_persistent_mode_retries_past_the_attempt_limit_until_its_cap(h: Harness) -> None:
    policy = LLMRetryPolicy(max_attempts=2, persistent_cap_s=3_600)
    limited = HttpError(429, "rate_limit_error", "Rate limited", {"retry-after": "600"})
    assert await h.ask(*[limited] * 5, ANSWER, persistent=True, policy=policy) == "All good."
    assert len(h.wire.requests) == 6
    # The fifth failure opened the breaker; the wait outlasted its cooldown, so the next
    # attempt was its probe, and closed it.
    assert [kind for kind, _ in h.events if kind.startswith("agent.breaker")] == [
        "agent.breaker.opened",
        "agent.breaker.closed",
    ]

    h.time.sleeps.clear()
    with pytest.raises(LLMCallFailed) as failed:
        await h.ask(*[limited] * 7, persistent=True, policy=policy)
    # Six waits of 10 min fill the hour; a seventh would pass the cap, so it gives up.
    assert (failed.value.error_class, failed.value.attempts) == ("persistent_cap", 7)
    assert sum(h.time.sleeps) == 3_600


async def test_persistent_mode_waits_for_an_open_breaker_instead_of_failing(h: Harness) -> None:
    h.use_breakers(CircuitBreakerPolicy(window_calls=2, min_calls=2, cooldown_s=120))
    down = HttpError(500, "api_error", "Internal server error")
    assert await h.ask(down, down, ANSWER, persistent=True) == "All good."
    first_wait, cooldown_wait = h.time.sleeps[0], sum(h.time.sleeps[1:])
    assert 0.5 <= first_wait <= 0.625
    assert cooldown_wait == 120  # not the 1 s backoff: the breaker refuses until then
    assert h.heartbeats == 3  # 30 + 30 + 30 + 30
    assert [kind for kind, _ in h.events if kind.startswith("agent.breaker")] == [
        "agent.breaker.opened",
        "agent.breaker.closed",
    ]


async def test_the_service_providers_serve_an_agents_fallback_model_too() -> None:
    """`Providers` hands out one provider per agent and run; a fallback model on the same
    provider (`fallback_name`) is served by the same one (which counted the faults). A
    scripted overload storm shows the switch end to end."""
    overloaded = ScriptedFault(kind="http", status=529, message="Overloaded", times=2)
    model = ModelConfig(
        provider="scripted",
        name=PRIMARY,
        fallback_name=FALLBACK,
        script=[ScriptedTurn(text="From the fallback.", fault=overloaded)],
    )
    now = datetime.now(UTC)
    agent = AgentRead(
        id="agent_1", version=1, created_at=now, updated_at=now, name="a", model=model
    )
    providers = Providers(LLMSettings())
    seen: list[str] = []
    fallback = agent.model.fallback_model()
    assert fallback is not None

    def provider_for(route: Route) -> Provider:
        seen.append(route.model)
        owner = agent if route.model == PRIMARY else agent.model_copy(update={"model": fallback})
        return providers(owner, "run_1")

    time = Time()
    resilient = ResilientModel(
        provider_for=provider_for,
        provider_name=agent.model.provider,
        breakers=Breakers(),
        policy=LLMRetryPolicy(overloads_before_fallback=2),
        fallback=Route(fallback.provider, fallback.name),
        sleep=time.sleep,
        clock=time,
    )
    request = LLMRequest(
        model=PRIMARY, system="", messages=[Message.user_text("Hi")], max_tokens=99
    )
    response = await resilient.complete(request, purpose="main_loop")
    assert response.content == [TextBlock(text="From the fallback.")]
    assert seen == [PRIMARY, PRIMARY, FALLBACK]
    await providers.aclose()
