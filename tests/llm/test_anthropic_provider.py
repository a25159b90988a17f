"""AnthropicProvider against a real local server speaking the Messages API wire format."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from app.agents.schemas import AgentRead
from app.core.config import LLMSettings
from app.core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from app.llm.provider import (
    LLMRequest,
    ProviderError,
    RefreshesCredentials,
    ToolChoice,
    ToolSpec,
    Usage,
)
from app.llm.providers.anthropic.settings import AnthropicSettings
from app.llm.providers.anthropic.wire import AnthropicProvider
from app.llm.providers.registry import Providers
from tests.support.anthropic_wire import (
    AnthropicWire,
    Delay,
    Drop,
    HttpError,
    Reply,
    StreamError,
    Text,
    ToolUse,
    anthropic_wire,
)

MODEL = "claude-wire-test"  # not a real model: the SDK warns about deprecated ones
API_KEY = "sk-ant-test-key"


@pytest.fixture
async def wire() -> AsyncIterator[AnthropicWire]:
    async with anthropic_wire() as server:
        yield server


@pytest.fixture
async def provider(wire: AnthropicWire) -> AsyncIterator[AnthropicProvider]:
    async with AnthropicProvider(API_KEY, base_url=wire.url) as p:
        yield p


def ask(text: str = "Hello", **fields: Any) -> LLMRequest:
    fields.setdefault("system", "")
    return LLMRequest(model=MODEL, messages=[Message.user_text(text)], max_tokens=256, **fields)


class Deltas:
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, text: str) -> None:
        self.seen.append(text)


async def test_text_streams_through_on_text_and_comes_back_whole(
    wire: AnthropicWire, provider: AnthropicProvider
) -> None:
    answer = "The quick brown fox jumps over the lazy dog."
    wire.plan(Reply.text(answer, chunk_chars=6, input_tokens=31, output_tokens=11))
    deltas = Deltas()

    response = await provider.complete(ask(), deltas)

    assert len(deltas.seen) > 3
    assert "".join(deltas.seen) == answer
    assert response.content == [TextBlock(text=answer)]
    assert response.stop_reason == "end_turn"
    assert response.usage == Usage(input_tokens=31, output_tokens=11)
    assert response.model == MODEL
    [received] = wire.requests
    assert received.body["stream"] is True
    assert received.body["model"] == MODEL
    assert received.body["max_tokens"] == 256
    assert received.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hello"}]}
    ]
    for absent in ("system", "tools", "tool_choice"):
        assert absent not in received.body
    # SDK 2.x sends the key as a bearer token; older ones sent `x-api-key`.
    auth = received.headers.get("authorization", "").removeprefix("Bearer ")
    assert received.headers.get("x-api-key", auth) == API_KEY
    assert received.headers["anthropic-version"]


async def test_usage_is_reported_as_it_becomes_known(
    wire: AnthropicWire, provider: AnthropicProvider
) -> None:
    """The input tokens arrive with the stream's start, so a call abandoned halfway (a
    cancelled run) can still be counted; the output total arrives before the end."""
    wire.plan(Reply.text("Counted as it goes.", input_tokens=31, output_tokens=11))
    reported: list[Usage] = []

    response = await provider.complete(ask(), None, reported.append)

    assert reported[0].input_tokens == 31
    assert reported[-1] == Usage(31, 11) == response.usage


async def test_on_text_is_optional(wire: AnthropicWire, provider: AnthropicProvider) -> None:
    wire.plan(Reply.text("fine", stop_reason="max_tokens"))

    response = await provider.complete(ask())

    assert response.content == [TextBlock(text="fine")]
    assert response.stop_reason == "max_tokens"


async def test_tool_use_input_is_parsed_from_streamed_fragments(
    wire: AnthropicWire, provider: AnthropicProvider
) -> None:
    weather = {"city": "Zürich", "units": "metric", "days": [1, 2, 3], "detail": {"wind": True}}
    wire.plan(
        Reply(
            (
                Text("Let me look."),
                ToolUse("get_weather", weather, id="toolu_01"),
                ToolUse("get_time", {}, id="toolu_02"),
            ),
            chunk_chars=5,
        )
    )
    deltas = Deltas()

    response = await provider.complete(ask("Weather?"), deltas)

    assert "".join(deltas.seen) == "Let me look."  # tool input is not text
    assert response.content == [
        TextBlock(text="Let me look."),
        ToolUseBlock(id="toolu_01", name="get_weather", input=weather),
        ToolUseBlock(id="toolu_02", name="get_time", input={}),
    ]
    assert response.stop_reason == "tool_use"


HISTORY = [
    Message.user_text("What is in /tmp and /nope?"),
    Message(
        role="assistant",
        content=[
            TextBlock(text="Listing both."),
            ToolUseBlock(id="toolu_a", name="ls", input={"path": "/tmp"}),
            ToolUseBlock(id="toolu_b", name="ls", input={"path": "/nope"}),
        ],
    ),
    Message(
        role="user",
        content=[
            ToolResultBlock(tool_use_id="toolu_a", content="a.txt\nb.txt"),
            ToolResultBlock(tool_use_id="toolu_b", content="no such directory", is_error=True),
        ],
    ),
]

LS = ToolSpec(
    name="ls",
    description="List a directory.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)
CAT = ToolSpec(name="cat", description="Print a file.", input_schema={"type": "object"})


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        (ToolChoice(), {"type": "auto"}),
        (ToolChoice("any"), {"type": "any"}),
        (ToolChoice("tool", "cat"), {"type": "tool", "name": "cat"}),
    ],
)
async def test_request_carries_system_tools_choice_and_history(
    wire: AnthropicWire,
    provider: AnthropicProvider,
    choice: ToolChoice,
    sent: dict[str, str],
) -> None:
    wire.plan(Reply.text("a.txt and b.txt; /nope does not exist."))
    request = LLMRequest(
        model=MODEL,
        system="You are terse.",
        messages=HISTORY,
        max_tokens=1024,
        tools=[LS, CAT],
        tool_choice=choice,
    )

    await provider.complete(request)

    [received] = wire.requests
    body = received.body
    assert body["system"] == "You are terse."
    assert body["max_tokens"] == 1024
    assert body["tool_choice"] == sent
    assert body["tools"] == [
        {"name": "ls", "description": "List a directory.", "input_schema": LS.input_schema},
        {"name": "cat", "description": "Print a file.", "input_schema": {"type": "object"}},
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is in /tmp and /nope?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Listing both."},
                {"type": "tool_use", "id": "toolu_a", "name": "ls", "input": {"path": "/tmp"}},
                {"type": "tool_use", "id": "toolu_b", "name": "ls", "input": {"path": "/nope"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "content": "a.txt\nb.txt",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": "no such directory",
                    "is_error": True,
                },
            ],
        },
    ]


async def test_tool_choice_tool_needs_a_name(provider: AnthropicProvider) -> None:
    with pytest.raises(ValueError, match="name"):
        await provider.complete(ask(tools=[CAT], tool_choice=ToolChoice("tool")))


@pytest.mark.parametrize(
    ("error", "header", "value", "error_class"),
    [
        (
            HttpError(
                429,
                "rate_limit_error",
                "Number of requests has exceeded your rate limit",
                {"retry-after": "17"},
            ),
            "retry-after",
            "17",
            "rate_limited",
        ),
        (
            HttpError(529, "overloaded_error", "Overloaded", {"x-should-retry": "true"}),
            "x-should-retry",
            "true",
            "overloaded",
        ),
        (
            HttpError(500, "api_error", "Internal server error", {"x-should-retry": "false"}),
            "x-should-retry",
            "false",
            "server_error",
        ),
        (
            HttpError(
                400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
            ),
            "request-id",
            "req_wire_0001",
            "context_overflow",
        ),
        (
            HttpError(401, "authentication_error", "invalid x-api-key"),
            "request-id",
            "req_wire_0001",
            "auth",
        ),
    ],
    ids=["429", "529", "500", "400", "401"],
)
async def test_error_status_becomes_provider_error_without_retry(
    wire: AnthropicWire,
    provider: AnthropicProvider,
    error: HttpError,
    header: str,
    value: str,
    error_class: str,
) -> None:
    wire.plan(error, Reply.text("a retry would have got this"))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())

    assert caught.value.error_class == error_class
    assert caught.value.status == error.status
    assert caught.value.headers[header] == value
    assert error.message in caught.value.message
    assert error.error_type in caught.value.message
    assert len(wire.requests) == 1


@pytest.mark.parametrize(
    ("error_type", "status", "error_class"),
    [
        ("overloaded_error", 529, "overloaded"),
        ("api_error", 500, "server_error"),
        ("rate_limit_error", 429, "rate_limited"),
        ("novel", 500, "server_error"),
    ],
)
async def test_error_event_mid_stream_becomes_provider_error(
    wire: AnthropicWire, provider: AnthropicProvider, error_type: str, status: int, error_class: str
) -> None:
    wire.plan(StreamError(error_type, "Overloaded", partial_text="I was saying"))
    deltas = Deltas()

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask(), deltas)

    assert "".join(deltas.seen) == "I was saying"
    assert caught.value.error_class == error_class
    assert caught.value.status == status
    assert "mid-stream" in caught.value.message
    assert "Overloaded" in caught.value.message
    assert caught.value.headers["request-id"] == "req_wire_0001"
    assert len(wire.requests) == 1


async def test_no_answer_within_timeout_is_a_timeout(
    wire: AnthropicWire, provider: AnthropicProvider
) -> None:
    wire.plan(Delay(30, Reply.text("too late")))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask(timeout_s=0.3))

    assert caught.value.error_class == "timeout"
    assert caught.value.status is None
    assert len(wire.requests) == 1


async def test_stream_that_stalls_is_a_timeout(
    wire: AnthropicWire, provider: AnthropicProvider
) -> None:
    wire.plan(Reply.text("slow and then silent", pause_s=30))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask(timeout_s=0.3))

    assert caught.value.error_class == "timeout"
    assert len(wire.requests) == 1


async def test_timeout_bounds_each_wait_not_the_whole_stream(
    wire: AnthropicWire, provider: AnthropicProvider
) -> None:
    wire.plan(Reply.text("steady progress wins", chunk_chars=2, pause_s=0.02))

    response = await provider.complete(ask(timeout_s=0.2))

    assert response.content == [TextBlock(text="steady progress wins")]


@pytest.mark.parametrize("partial_text", ["", "half an ans"])
async def test_dropped_connection_is_a_connection_error(
    wire: AnthropicWire, provider: AnthropicProvider, partial_text: str
) -> None:
    wire.plan(Drop(partial_text))
    deltas = Deltas()

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask(), deltas)

    assert caught.value.error_class == "connection"
    assert caught.value.status is None
    assert "".join(deltas.seen) == partial_text
    assert len(wire.requests) == 1


async def test_stream_closed_before_message_stop_is_a_connection_error(
    wire: AnthropicWire, provider: AnthropicProvider
) -> None:
    wire.plan(Drop("the answer is", clean=True))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())

    assert caught.value.error_class == "connection"
    assert "message_stop" in caught.value.message


async def test_refused_connection_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused

        async with AnthropicProvider(API_KEY, base_url=f"http://127.0.0.1:{port}") as provider:
            with pytest.raises(ProviderError) as caught:
                await provider.complete(ask())

    assert caught.value.error_class == "connection"


async def test_wire_answers_without_stream_too(wire: AnthropicWire) -> None:
    """The server's JSON answer parses with the SDK, so the two formats agree."""
    wire.plan(Reply((Text("ok"), ToolUse("ls", {"path": "/"}))))

    async with anthropic.AsyncAnthropic(api_key=API_KEY, base_url=wire.url, max_retries=0) as sdk:
        message = await sdk.messages.create(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )

    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.stop_reason == "tool_use"
    assert wire.requests[0].body.get("stream") in (None, False)


async def test_refreshing_credentials_reads_the_rotated_key_file(
    wire: AnthropicWire, tmp_path: Any
) -> None:
    key_file = tmp_path / "anthropic.key"
    key_file.write_text("sk-ant-old\n")
    wire.plan(HttpError(401, "authentication_error", "invalid x-api-key"), Reply.text("hi"))
    settings = LLMSettings(anthropic=AnthropicSettings(api_key_file=key_file, base_url=wire.url))
    providers = Providers(settings)
    agent = AgentRead.model_validate(
        {
            "id": "agent_1",
            "name": "a",
            "version": 1,
            "model": {"provider": "anthropic", "name": MODEL},
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
        }
    )
    provider = providers(agent, "run_1")
    assert isinstance(provider, RefreshesCredentials)
    try:
        with pytest.raises(ProviderError) as refused:
            await provider.complete(ask())
        assert refused.value.status == 401
        key_file.write_text("sk-ant-new\n")  # the secret was rotated
        await provider.refresh_credentials()
        response = await provider.complete(ask())
    finally:
        await providers.aclose()
    assert response.content == [TextBlock(text="hi")]
    sent = [" ".join(r.headers.values()) for r in wire.requests]  # the SDK picks the header
    assert ["sk-ant-old" in h for h in sent] == [True, False]
    assert ["sk-ant-new" in h for h in sent] == [False, True]
