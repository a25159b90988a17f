"""Each provider reports failures in neutral classes, and the call policy acts on those
alone: Anthropic's answers (from a real local server speaking its wire format) become an
overflow with its counts, an overload, a rate limit with its `retry-after`; the scripted
model's faults are classed as that API would class them; and an overflow from a provider
that words it its own way still shrinks `max_tokens`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from app.core.breakers import Breakers
from app.core.messages import Message, TextBlock
from app.core.model_config import ScriptedFault
from app.llm.policy import retry_after_s
from app.llm.provider import (
    LLMRequest,
    LLMResponse,
    Overflow,
    ProviderError,
    TextSink,
    Usage,
    UsageSink,
)
from app.llm.providers.anthropic.wire import AnthropicProvider
from app.llm.providers.scripted.faults import fault_error
from app.llm.resilient import ResilientModel
from tests.support.anthropic_wire import AnthropicWire, HttpError, anthropic_wire

MODEL = "claude-wire-test"


@pytest.fixture
async def wire() -> AsyncIterator[AnthropicWire]:
    async with anthropic_wire() as server:
        yield server


async def failure(wire: AnthropicWire, error: HttpError) -> ProviderError:
    wire.plan(error)
    request = LLMRequest(
        model=MODEL, system="", messages=[Message.user_text("Hi")], max_tokens=20_000
    )
    async with AnthropicProvider("sk-ant-test", base_url=wire.url) as provider:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(request)
    return caught.value


async def test_an_anthropic_overflow_carries_the_three_counts(wire: AnthropicWire) -> None:
    text = "input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000"
    error = await failure(wire, HttpError(400, "invalid_request_error", text))

    assert (error.error_class, error.status) == ("context_overflow", 400)
    assert error.overflow == Overflow(
        input_tokens=188_059, max_tokens=20_000, context_window=200_000
    )


async def test_another_anthropic_400_is_a_bad_request_without_counts(wire: AnthropicWire) -> None:
    error = await failure(wire, HttpError(400, "invalid_request_error", "messages: required"))

    assert (error.error_class, error.overflow) == ("bad_request", None)


async def test_an_anthropic_529_is_an_overload(wire: AnthropicWire) -> None:
    error = await failure(wire, HttpError(529, "overloaded_error", "Overloaded"))

    assert (error.error_class, error.status, error.should_retry) == ("overloaded", 529, None)


async def test_an_anthropic_429_is_a_rate_limit_with_its_retry_after(wire: AnthropicWire) -> None:
    limited = HttpError(
        429, "rate_limit_error", "Slow down", {"retry-after": "17", "x-should-retry": "true"}
    )
    error = await failure(wire, limited)

    assert (error.error_class, error.status) == ("rate_limited", 429)
    assert error.headers["retry-after"] == "17"
    assert retry_after_s(error.headers, now=datetime.now(UTC)) == 17.0
    assert error.should_retry is True


@pytest.mark.parametrize(
    ("fault", "error_class"),
    [
        (ScriptedFault(status=529, message="Overloaded"), "overloaded"),
        (ScriptedFault(status=429, headers={"Retry-After": "7"}), "rate_limited"),
        (ScriptedFault(status=401), "auth"),
        (ScriptedFault(status=403), "forbidden"),
        (ScriptedFault(status=404), "not_found"),
        (ScriptedFault(status=409), "conflict"),
        (ScriptedFault(status=422), "bad_request"),
        (ScriptedFault(status=503), "server_error"),
        (ScriptedFault(status=400, message="exceed context limit: 5 + 6 > 10"), "context_overflow"),
        (ScriptedFault(kind="timeout"), "timeout"),
        (ScriptedFault(kind="connection"), "connection"),
    ],
)
def test_a_scripted_fault_is_classed_as_the_api_it_imitates_would(
    fault: ScriptedFault, error_class: str
) -> None:
    error = fault_error(fault)
    assert (error.error_class, error.status, error.message) == (
        error_class,
        fault.status,
        fault.message,
    )


def test_a_scripted_fault_keeps_its_headers_and_the_servers_verdict() -> None:
    error = fault_error(
        ScriptedFault(status=503, headers={"Retry-After": "7", "X-Should-Retry": "false"})
    )
    assert error.headers == {"retry-after": "7", "x-should-retry": "false"}
    assert error.should_retry is False
    overflow = fault_error(ScriptedFault(status=400, message="exceed context limit: 5 + 6 > 10"))
    assert overflow.overflow == Overflow(5, 6, 10)


class FullContext:
    """A provider of another vendor: it says "context window full" in its own words and
    states the counts only in the neutral fields."""

    def __init__(self) -> None:
        self.max_tokens: list[int] = []

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        self.max_tokens.append(request.max_tokens)
        if len(self.max_tokens) == 1:
            raise ProviderError(
                "context_overflow",
                "other-vendor: context_length_exceeded",
                status=400,
                overflow=Overflow(input_tokens=120_000, context_window=128_000),
            )
        return LLMResponse([TextBlock(text="done")], "end_turn", Usage(), request.model)


async def test_an_overflow_from_another_vendor_shrinks_max_tokens() -> None:
    provider = FullContext()
    events: list[tuple[str, dict[str, object]]] = []

    async def on_event(event_type: str, data: dict[str, object]) -> None:
        events.append((event_type, data))

    async def no_sleep(seconds: float) -> None:
        raise AssertionError("a fixed request needs no wait")

    model = ResilientModel(
        provider_for=lambda _route: provider,
        provider_name="other",
        breakers=Breakers(),
        on_event=on_event,
        sleep=no_sleep,
    )
    request = LLMRequest(
        model="other-large", system="", messages=[Message.user_text("Hi")], max_tokens=16_000
    )
    response = await model.complete(request, purpose="main_loop")

    assert response.content == [TextBlock(text="done")]
    assert provider.max_tokens == [16_000, 8_000]
    assert events == [
        ("agent.llm.max_tokens_adjusted", {"model": "other-large", "from": 16_000, "to": 8_000})
    ]
