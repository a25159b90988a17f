"""ResilientModel over the real OpenAI-compatible provider, and across providers: an
Anthropic model (a local server speaking the Messages API) falling back to an
OpenAI-compatible one (a local server speaking Chat Completions). What each server
received says which attempt went where; sleep and clock are injected."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.core.breakers import Breakers
from app.core.messages import Message, TextBlock
from app.llm.policy import LLMRetryPolicy
from app.llm.provider import LLMRequest, Provider
from app.llm.providers.anthropic.wire import AnthropicProvider
from app.llm.providers.openai.wire import OpenAIProvider
from app.llm.resilient import LLMCallFailed, ResilientModel, Route
from tests.llm.test_llm_policy_wire import Time
from tests.support import anthropic_wire as messages_api
from tests.support.anthropic_wire import AnthropicWire, anthropic_wire
from tests.support.chat_completions_wire import (
    ChatCompletionsWire,
    HttpError,
    Reply,
    chat_completions_wire,
)

CLAUDE = "claude-wire-primary"
LOCAL = "llama3.1:8b"
LOCAL_ROUTE = Route("openai", LOCAL)
OVERLOADED = messages_api.HttpError(529, "overloaded_error", "Overloaded")


@dataclass
class Servers:
    messages: AnthropicWire
    chat: ChatCompletionsWire
    anthropic: AnthropicProvider
    openai: OpenAIProvider
    time: Time = field(default_factory=Time)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    breakers: Breakers = field(default_factory=Breakers)

    def provider_for(self, route: Route) -> Provider:
        return self.anthropic if route.provider == "anthropic" else self.openai

    def model(self, provider_name: str, **options: Any) -> ResilientModel:
        async def on_event(event_type: str, data: dict[str, Any]) -> None:
            self.events.append((event_type, data))

        return ResilientModel(
            provider_for=self.provider_for,
            provider_name=provider_name,
            breakers=self.breakers,
            on_event=on_event,
            sleep=self.time.sleep,
            rng=random.Random(7),
            clock=self.time,
            **options,
        )

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        return [data for kind, data in self.events if kind == event_type]


@pytest.fixture
async def s() -> AsyncIterator[Servers]:
    async with (
        anthropic_wire() as messages,
        chat_completions_wire() as chat,
        AnthropicProvider("sk-ant-test", base_url=messages.url) as anthropic,
        OpenAIProvider("sk-test", base_url=chat.base_url) as openai,
    ):
        yield Servers(messages, chat, anthropic, openai)


def request(model: str, max_tokens: int = 4_096) -> LLMRequest:
    return LLMRequest(model, "", [Message.user_text("Hello")], max_tokens)


async def test_a_429_waits_what_retry_after_says(s: Servers) -> None:
    limited = HttpError(429, "Rate limit reached", "requests", headers={"retry-after": "7"})
    s.chat.plan(limited, Reply("All good."))

    response = await s.model("openai").complete(request(LOCAL), purpose="main_loop")

    assert response.content == [TextBlock(text="All good.")]
    assert s.time.sleeps == [7.0]
    [retry] = s.of_type("agent.llm.retry")
    assert (retry["class"], retry["http_status"], retry["delay_s"]) == ("rate_limited", 429, 7.0)
    assert len(s.chat.requests) == 2


async def test_an_overflow_is_retried_at_once_with_the_room_left(s: Servers) -> None:
    overflow = HttpError(
        400,
        "This model's maximum context length is 16384 tokens. However, you requested 17096 "
        "tokens (13000 in the messages, 4096 in the completion).",
        code="context_length_exceeded",
    )
    s.chat.plan(overflow, Reply("Shorter, then."))

    response = await s.model("openai").complete(request(LOCAL), purpose="main_loop")

    assert response.content == [TextBlock(text="Shorter, then.")]
    assert [r.body["max_tokens"] for r in s.chat.requests] == [4_096, 3_384]
    assert s.time.sleeps == []
    [adjusted] = s.of_type("agent.llm.max_tokens_adjusted")
    assert adjusted == {"model": LOCAL, "from": 4_096, "to": 3_384}


async def test_an_overflow_without_room_for_the_answer_is_not_retried(s: Servers) -> None:
    s.chat.plan(
        HttpError(
            400,
            "the request exceeds the available context size, try increasing it",
            "exceed_context_size_error",
            400,
            extra={"n_prompt_tokens": 9412, "n_ctx": 8192},
        )
    )

    with pytest.raises(LLMCallFailed) as failed:
        await s.model("openai").complete(request(LOCAL), purpose="main_loop")

    assert failed.value.error_class == "context_overflow"
    assert len(s.chat.requests) == 1


async def test_an_overloaded_anthropic_model_falls_back_to_a_local_one(s: Servers) -> None:
    s.messages.plan(OVERLOADED, OVERLOADED)
    s.chat.plan(Reply("From the local model."))
    policy = LLMRetryPolicy(overloads_before_fallback=2)

    model = s.model("anthropic", fallback=LOCAL_ROUTE, policy=policy)
    response = await model.complete(request(CLAUDE), purpose="main_loop")

    assert response.content == [TextBlock(text="From the local model.")]
    assert response.model == LOCAL
    assert model.attempting == LOCAL_ROUTE  # the call is priced as the local model's
    assert [r.body["model"] for r in s.messages.requests] == [CLAUDE, CLAUDE]
    assert [r.body["model"] for r in s.chat.requests] == [LOCAL]
    [switch] = s.of_type("agent.llm.fallback")
    assert switch == {
        "from_model": CLAUDE,
        "to_model": LOCAL,
        "from_provider": "anthropic",
        "to_provider": "openai",
        "reason": "overloaded",
        "overloads": 2,
    }
    assert len(s.time.sleeps) == 1  # one backoff between the overloads, none after


async def test_breakers_are_named_per_provider_and_an_open_one_goes_straight_across(
    s: Servers,
) -> None:
    """Five overloads in a row open Anthropic's breaker (the default policy: five calls
    known, half failed); the next call goes to the local model without trying the primary."""
    policy = LLMRetryPolicy(overloads_before_fallback=10, max_attempts=10)
    s.messages.plan(*[OVERLOADED] * 5)
    s.chat.plan(Reply("First."), Reply("Second."))
    model = s.model("anthropic", fallback=LOCAL_ROUTE, policy=policy)

    await model.complete(request(CLAUDE), purpose="main_loop")
    second = await model.complete(request(CLAUDE), purpose="main_loop")

    assert second.content == [TextBlock(text="Second.")]
    assert s.breakers.snapshot() == {
        f"provider:anthropic:{CLAUDE}": "open",
        f"provider:openai:{LOCAL}": "closed",
    }
    assert [f["reason"] for f in s.of_type("agent.llm.fallback")] == ["breaker_open"] * 2
    assert len(s.messages.requests) == 5  # none once the breaker opened
    assert len(s.chat.requests) == 2


async def test_a_fallback_on_the_same_provider_is_the_same_server(s: Servers) -> None:
    s.chat.plan(
        HttpError(503, "Slow Down", "server_error"),
        HttpError(503, "Slow Down", "server_error"),
        Reply("Smaller model here."),
    )
    policy = LLMRetryPolicy(overloads_before_fallback=2)
    model = s.model("openai", fallback=Route("openai", "llama3.2:3b"), policy=policy)

    response = await model.complete(request(LOCAL), purpose="main_loop")

    assert response.content == [TextBlock(text="Smaller model here.")]
    assert [r.body["model"] for r in s.chat.requests] == [LOCAL, LOCAL, "llama3.2:3b"]


async def test_one_model_on_two_servers_has_a_breaker_per_server(s: Servers) -> None:
    """The same local model served by two machines: the one that keeps failing opens its
    own breaker, and calls to the other go on (a breaker per model name would stop both)."""
    down = HttpError(503, "Slow Down", "server_error")
    s.chat.plan(*[down] * 5)
    policy = LLMRetryPolicy(max_attempts=5, overloads_before_fallback=10)
    failing = s.model("openai", server=s.chat.base_url, policy=policy)
    with pytest.raises(LLMCallFailed):
        await failing.complete(request(LOCAL), purpose="main_loop")

    async with (
        chat_completions_wire() as other,
        OpenAIProvider("sk-test", base_url=other.base_url) as other_provider,
    ):
        other.plan(Reply("The other machine answers."))
        healthy = s.model("openai", server=other.base_url)
        healthy.provider_for = lambda route: other_provider
        response = await healthy.complete(request(LOCAL), purpose="main_loop")
        other_host = other.base_url.split("//")[1].split("/")[0]

    assert response.content == [TextBlock(text="The other machine answers.")]
    host = s.chat.base_url.split("//")[1].split("/")[0]
    assert s.breakers.snapshot() == {
        f"provider:openai:{LOCAL}@{host}": "open",
        f"provider:openai:{LOCAL}@{other_host}": "closed",
    }
