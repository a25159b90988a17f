"""OpenAIProvider against a real local server speaking the Chat Completions wire format:
our transcript, tools and tool choice as the server receives them, the streamed answer
(text, tool calls in pieces, usage) as we read it, and every failure as a neutral class.
Its pool: which server each model reaches, with which key."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.agents.schemas import AgentRead
from app.core.config import LLMSettings
from app.core.messages import (
    UNPARSED_ARGUMENTS,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from app.core.model_config import ModelConfig
from app.llm.provider import (
    LLMRequest,
    Overflow,
    ProviderError,
    ProviderUnavailable,
    RefreshesCredentials,
    ToolChoice,
    ToolSpec,
    Usage,
)
from app.llm.providers.openai.errors import parse_overflow
from app.llm.providers.openai.settings import PLACEHOLDER_KEY, OpenAISettings
from app.llm.providers.openai.wire import ERROR_PREFIX, OpenAIProvider
from app.llm.providers.registry import Providers
from tests.support.chat_completions_wire import (
    ChatCompletionsWire,
    Delay,
    Drop,
    HttpError,
    Reply,
    StreamError,
    ToolCall,
    chat_completions_wire,
)

MODEL = "llama-wire-test"
API_KEY = "sk-wire-test-key"


@pytest.fixture
async def wire() -> AsyncIterator[ChatCompletionsWire]:
    async with chat_completions_wire() as server:
        yield server


@pytest.fixture
async def provider(wire: ChatCompletionsWire) -> AsyncIterator[OpenAIProvider]:
    async with OpenAIProvider(API_KEY, base_url=wire.base_url) as p:
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
    wire: ChatCompletionsWire, provider: OpenAIProvider
) -> None:
    answer = "The quick brown fox jumps over the lazy dog."
    wire.plan(Reply(answer, chunk_chars=6, prompt_tokens=31, completion_tokens=11))
    deltas = Deltas()

    response = await provider.complete(ask(), deltas)

    assert len(deltas.seen) > 3
    assert "".join(deltas.seen) == answer
    assert response.content == [TextBlock(text=answer)]
    assert response.stop_reason == "end_turn"
    assert response.usage == Usage(input_tokens=31, output_tokens=11)
    assert response.model == MODEL
    [received] = wire.requests
    body = received.body
    assert body["model"] == MODEL
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    # Not OpenAI's own API: `max_tokens`, which every compatible server reads.
    assert body["max_tokens"] == 256 and "max_completion_tokens" not in body
    assert body["messages"] == [{"role": "user", "content": "Hello"}]
    for absent in ("tools", "tool_choice"):
        assert absent not in body
    assert received.headers["authorization"] == f"Bearer {API_KEY}"


async def test_usage_counts_cached_prompt_tokens_apart(
    wire: ChatCompletionsWire, provider: OpenAIProvider
) -> None:
    """OpenAI counts cached tokens inside `prompt_tokens`: they are cache reads, the rest
    input read afresh. The usage arrives in the last chunk, and is reported then."""
    wire.plan(Reply("Cached.", prompt_tokens=1_200, cached_tokens=1_024, completion_tokens=9))
    reported: list[Usage] = []

    response = await provider.complete(ask(), None, reported.append)

    expected = Usage(input_tokens=176, output_tokens=9, cache_read_tokens=1_024)
    assert response.usage == expected
    assert reported == [expected]


async def test_the_model_that_answered_is_the_one_the_chunks_name(
    wire: ChatCompletionsWire, provider: OpenAIProvider
) -> None:
    """OpenAI answers `gpt-4o` as its dated snapshot, which is priced as its family."""
    wire.plan(Reply("hi", model="gpt-4o-2024-08-06"))

    response = await provider.complete(ask())

    assert response.model == "gpt-4o-2024-08-06"


@pytest.mark.parametrize("interleave", [False, True], ids=["in-turn", "interleaved"])
async def test_tool_calls_are_put_together_from_their_pieces_by_index(
    wire: ChatCompletionsWire, provider: OpenAIProvider, interleave: bool
) -> None:
    weather = {"city": "Zürich", "units": "metric", "days": [1, 2, 3], "detail": {"wind": True}}
    wire.plan(
        Reply.tools(
            ToolCall("get_weather", weather, id="call_01"),
            ToolCall("get_time", {"zone": "Europe/Zurich"}, id="call_02"),
            ToolCall("get_date", id="call_03"),
            text="Let me look.",
            chunk_chars=5,
            interleave=interleave,
        )
    )
    deltas = Deltas()

    response = await provider.complete(ask("Weather?"), deltas)

    assert "".join(deltas.seen) == "Let me look."  # arguments are not text
    assert response.content == [
        TextBlock(text="Let me look."),
        ToolUseBlock(id="call_01", name="get_weather", input=weather),
        ToolUseBlock(id="call_02", name="get_time", input={"zone": "Europe/Zurich"}),
        ToolUseBlock(id="call_03", name="get_date", input={}),
    ]
    assert response.stop_reason == "tool_use"


async def test_tool_calls_without_an_index_are_told_apart_by_their_ids(
    wire: ChatCompletionsWire, provider: OpenAIProvider
) -> None:
    wire.plan(
        Reply.tools(
            ToolCall("ls", {"path": "/tmp"}, id="call_a"),
            ToolCall("ls", {"path": "/var"}, id="call_b"),
            interleave=True,
            no_index=True,
        )
    )

    response = await provider.complete(ask())

    assert response.content == [
        ToolUseBlock(id="call_a", name="ls", input={"path": "/tmp"}),
        ToolUseBlock(id="call_b", name="ls", input={"path": "/var"}),
    ]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"path": "/tmp", ', {UNPARSED_ARGUMENTS: '{"path": "/tmp", '}),  # cut short
        ("path=/tmp", {UNPARSED_ARGUMENTS: "path=/tmp"}),
        ('["/tmp"]', {UNPARSED_ARGUMENTS: '["/tmp"]'}),  # JSON, but not an object
        ("", {}),  # no arguments at all: a call without any
    ],
    ids=["truncated", "not-json", "array", "empty"],
)
async def test_arguments_that_are_not_a_json_object_are_kept_as_their_text(
    wire: ChatCompletionsWire, provider: OpenAIProvider, arguments: str, expected: dict[str, Any]
) -> None:
    """Not a crash and not a retry: the call is kept, for the tool runner to answer with an
    error the model can act on (tests/runs/test_unparsed_arguments.py)."""
    wire.plan(Reply.tools(ToolCall("ls", arguments, id="call_x")))

    response = await provider.complete(ask())

    assert response.content == [ToolUseBlock(id="call_x", name="ls", input=expected)]


@pytest.mark.parametrize(
    ("finish_reason", "calls", "stop_reason"),
    [
        ("stop", (), "end_turn"),
        ("length", (), "max_tokens"),
        ("content_filter", (), "refusal"),
        ("tool_calls", (ToolCall("ls"),), "tool_use"),
        ("stop", (ToolCall("ls"),), "tool_use"),  # servers that say `stop` after a call
    ],
)
async def test_finish_reason_becomes_our_stop_reason(
    wire: ChatCompletionsWire,
    provider: OpenAIProvider,
    finish_reason: str,
    calls: tuple[ToolCall, ...],
    stop_reason: str,
) -> None:
    wire.plan(Reply("fine", calls, finish_reason=finish_reason))

    response = await provider.complete(ask())

    assert response.stop_reason == stop_reason


HISTORY = [
    Message.user_text("What is in /tmp and /nope?"),
    Message(
        role="assistant",
        content=[
            TextBlock(text="Listing both."),
            ToolUseBlock(id="call_a", name="ls", input={"path": "/tmp"}),
            ToolUseBlock(id="call_b", name="ls", input={"path": "/nope"}),
        ],
    ),
    Message(
        role="user",
        content=[
            ToolResultBlock(tool_use_id="call_a", content="a.txt\nb.txt"),
            ToolResultBlock(tool_use_id="call_b", content="no such directory", is_error=True),
            TextBlock(text="Be quick."),
        ],
    ),
    Message(
        role="assistant",
        content=[ToolUseBlock(id="call_c", name="cat", input={UNPARSED_ARGUMENTS: "a.txt"})],
    ),
    Message(
        role="user",
        content=[ToolResultBlock(tool_use_id="call_c", content="Error: not JSON", is_error=True)],
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
        (ToolChoice(), "auto"),
        (ToolChoice("any"), "required"),
        (ToolChoice("tool", "cat"), {"type": "function", "function": {"name": "cat"}}),
    ],
    ids=["auto", "any", "tool"],
)
async def test_request_carries_system_tools_choice_and_history(
    wire: ChatCompletionsWire,
    provider: OpenAIProvider,
    choice: ToolChoice,
    sent: str | dict[str, Any],
) -> None:
    wire.plan(Reply("a.txt and b.txt; /nope does not exist."))
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
    assert body["tool_choice"] == sent
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "ls",
                "description": "List a directory.",
                "parameters": LS.input_schema,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "cat",
                "description": "Print a file.",
                "parameters": {"type": "object"},
            },
        },
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is in /tmp and /nope?"},
        {
            "role": "assistant",
            "content": "Listing both.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "/tmp"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "/nope"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "a.txt\nb.txt"},
        {
            "role": "tool",
            "tool_call_id": "call_b",
            "content": ERROR_PREFIX + "no such directory",
        },
        {"role": "user", "content": "Be quick."},
        {
            "role": "assistant",
            "content": None,
            # Arguments that were not JSON go back as none: some servers parse the history's.
            "tool_calls": [
                {"id": "call_c", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_c", "content": ERROR_PREFIX + "Error: not JSON"},
    ]


async def test_tool_choice_tool_needs_a_name(provider: OpenAIProvider) -> None:
    with pytest.raises(ValueError, match="name"):
        await provider.complete(ask(tools=[CAT], tool_choice=ToolChoice("tool")))


@pytest.mark.parametrize(
    ("error", "header", "value", "error_class", "should_retry"),
    [
        (
            HttpError(
                429,
                "Rate limit reached for requests",
                "requests",
                "rate_limit_exceeded",
                {"retry-after": "17"},
            ),
            "retry-after",
            "17",
            "rate_limited",
            None,
        ),
        (
            HttpError(
                503,
                "The engine is currently overloaded, please try again later",
                "server_error",
                headers={"x-should-retry": "true"},
            ),
            "x-should-retry",
            "true",
            "overloaded",
            True,
        ),
        (
            HttpError(
                500,
                "The server had an error while processing your request.",
                "server_error",
                headers={"x-should-retry": "false"},
            ),
            "x-should-retry",
            "false",
            "server_error",
            False,
        ),
        (
            HttpError(401, "Incorrect API key provided", code="invalid_api_key"),
            "x-request-id",
            "req_wire_0001",
            "auth",
            None,
        ),
        (
            HttpError(404, "The model `nope` does not exist", code="model_not_found"),
            "x-request-id",
            "req_wire_0001",
            "not_found",
            None,
        ),
        (
            HttpError(429, "You exceeded your current quota", "insufficient_quota"),
            "x-request-id",
            "req_wire_0001",
            "bad_request",  # no wait makes it pass
            None,
        ),
    ],
    ids=["429", "503", "500", "401", "404", "no-credit"],
)
async def test_error_status_becomes_provider_error_without_retry(
    wire: ChatCompletionsWire,
    provider: OpenAIProvider,
    error: HttpError,
    header: str,
    value: str,
    error_class: str,
    should_retry: bool | None,
) -> None:
    wire.plan(error, Reply("a retry would have got this"))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())

    assert caught.value.error_class == error_class
    assert caught.value.status == error.status
    assert caught.value.headers[header] == value
    assert caught.value.should_retry is should_retry
    assert error.message in caught.value.message
    assert caught.value.message.startswith(f"openai: {error.status} {error.type}")
    assert caught.value.overflow is None
    assert len(wire.requests) == 1


OPENAI_OVERFLOW = (
    "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens "
    "(5000 in the messages, 4000 in the completion). Please reduce the length of the "
    "messages or completion."
)


@pytest.mark.parametrize(
    ("error", "overflow"),
    [
        (
            HttpError(400, OPENAI_OVERFLOW, code="context_length_exceeded"),
            Overflow(input_tokens=5000, max_tokens=4000, context_window=8192),
        ),
        (
            HttpError(
                400,
                "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's "
                "maximum context length is 32768 tokens and your request has 29000 input "
                "tokens (4096 > 32768 - 29000).",
                "BadRequestError",
                400,
            ),
            Overflow(input_tokens=29000, max_tokens=4096, context_window=32768),
        ),
        (
            HttpError(
                400,
                "This model's maximum context length is 32768 tokens. However, you requested "
                "33000 tokens in the messages, Please reduce the length of the messages.",
                "BadRequestError",
                400,
                top_level=True,  # vLLM's older body: the error object is the body
            ),
            Overflow(input_tokens=33000, context_window=32768),
        ),
        (
            HttpError(
                400,
                "the request exceeds the available context size, try increasing it",
                "exceed_context_size_error",
                400,
                extra={"n_prompt_tokens": 9412, "n_ctx": 8192},  # llama.cpp
            ),
            Overflow(input_tokens=9412, context_window=8192),
        ),
        (
            HttpError(400, "input length exceeds the context length", "api_error"),  # Ollama
            Overflow(),
        ),
    ],
    ids=["openai", "vllm", "vllm-legacy", "llama.cpp", "ollama"],
)
async def test_a_context_overflow_is_one_with_the_counts_it_states(
    wire: ChatCompletionsWire, provider: OpenAIProvider, error: HttpError, overflow: Overflow
) -> None:
    wire.plan(error)

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())

    assert caught.value.error_class == "context_overflow"
    assert caught.value.status == 400
    assert caught.value.overflow == overflow


@pytest.mark.parametrize(
    ("message", "overflow"),
    [
        (
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130000 tokens (129000 in the messages, 1000 in the functions). "
            "Please reduce the length of the messages or functions.",
            Overflow(input_tokens=130_000, context_window=128_000),
        ),
        (
            "This model's maximum context length is 8192 tokens. However, you requested 9200 "
            "tokens (5000 in the messages, 200 in the functions, 4000 in the completion).",
            Overflow(input_tokens=5200, max_tokens=4000, context_window=8192),
        ),
        (
            "This model's maximum context length is 8192 tokens. However, your request has "
            "9000 input tokens. Please reduce the length of the input messages.",
            Overflow(input_tokens=9000, context_window=8192),
        ),
        (
            "request (13392 tokens) exceeds the available context size (8192 tokens), try "
            "increasing it",
            Overflow(input_tokens=13392, context_window=8192),
        ),
        (
            "Trying to keep the first 9000 tokens when context the overflows. However, the "
            "model is loaded with context length of only 8192 tokens, which is not enough.",
            Overflow(input_tokens=9000, context_window=8192),
        ),
        (
            "Input tokens exceed the configured limit of 272000 tokens. Your messages "
            "resulted in 300000 tokens. Please reduce the length of the messages.",
            Overflow(input_tokens=300_000, context_window=272_000),
        ),
        (
            "Your input exceeds the context window of this model. Please adjust your input "
            "and try again.",
            Overflow(),
        ),
        ("Context length exceeded", Overflow()),
        ("max_tokens must be a positive integer", None),
        ("Invalid schema for function 'ls'", None),
    ],
    ids=[
        "openai-functions",
        "openai-three-parts",
        "vllm-input",
        "llama.cpp-counts",
        "lm-studio",
        "openai-configured-limit",
        "openai-no-counts",
        "lm-studio-no-counts",
        "other-400",
        "bad-schema",
    ],
)
def test_overflow_wordings_are_read_for_their_counts(
    message: str, overflow: Overflow | None
) -> None:
    assert parse_overflow(message) == overflow


async def test_an_error_sent_mid_stream_becomes_provider_error(
    wire: ChatCompletionsWire, provider: OpenAIProvider
) -> None:
    wire.plan(StreamError(partial_text="I was saying"))
    deltas = Deltas()

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask(), deltas)

    assert "".join(deltas.seen) == "I was saying"
    assert caught.value.error_class == "server_error"
    assert caught.value.status == 500
    assert "mid-stream" in caught.value.message
    assert "had an error" in caught.value.message


async def test_an_overflow_sent_mid_stream_with_vllms_code_is_one(
    wire: ChatCompletionsWire, provider: OpenAIProvider
) -> None:
    wire.plan(StreamError(OPENAI_OVERFLOW, "BadRequestError", 400))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())

    assert (caught.value.error_class, caught.value.status) == ("context_overflow", 400)
    assert caught.value.overflow == Overflow(5000, 4000, 8192)


async def test_no_answer_within_timeout_is_a_timeout(
    wire: ChatCompletionsWire, provider: OpenAIProvider
) -> None:
    wire.plan(Delay(30, Reply("too late")))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask(timeout_s=0.3))

    assert caught.value.error_class == "timeout"
    assert caught.value.status is None
    assert len(wire.requests) == 1


async def test_stream_that_stalls_is_a_timeout(
    wire: ChatCompletionsWire, provider: OpenAIProvider
) -> None:
    wire.plan(Reply("slow and then silent", pause_s=30))
    deltas = Deltas()

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask(timeout_s=0.3), deltas)

    assert caught.value.error_class == "timeout"
    assert deltas.seen == []  # the role's chunk came, then nothing
    assert len(wire.requests) == 1


async def test_timeout_bounds_each_wait_not_the_whole_stream(
    wire: ChatCompletionsWire, provider: OpenAIProvider
) -> None:
    wire.plan(Reply("steady progress wins", chunk_chars=2, pause_s=0.02))

    response = await provider.complete(ask(timeout_s=0.2))

    assert response.content == [TextBlock(text="steady progress wins")]


@pytest.mark.parametrize("partial_text", ["", "half an ans"])
async def test_dropped_connection_is_a_connection_error(
    wire: ChatCompletionsWire, provider: OpenAIProvider, partial_text: str
) -> None:
    wire.plan(Drop(partial_text))
    deltas = Deltas()

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask(), deltas)

    assert caught.value.error_class == "connection"
    assert caught.value.status is None
    assert "".join(deltas.seen) == partial_text
    assert len(wire.requests) == 1


async def test_stream_closed_before_a_finish_reason_is_a_connection_error(
    wire: ChatCompletionsWire, provider: OpenAIProvider
) -> None:
    """Not a short answer: a stream that ends without a finish_reason (nor `[DONE]`) was
    cut, and is worth another attempt."""
    wire.plan(Drop("the answer is", clean=True))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())

    assert caught.value.error_class == "connection"
    assert "finish_reason" in caught.value.message


async def test_refused_connection_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused

        async with OpenAIProvider(API_KEY, base_url=f"http://127.0.0.1:{port}/v1") as provider:
            with pytest.raises(ProviderError) as caught:
                await provider.complete(ask())

    assert caught.value.error_class == "connection"


# -- the pool: which server, which key ---------------------------------------------------


def agent(**model: Any) -> AgentRead:
    return AgentRead.model_validate(
        {
            "id": "agent_1",
            "name": "a",
            "version": 1,
            "model": {"provider": "openai", "name": MODEL, **model},
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
        }
    )


def authorization(wire: ChatCompletionsWire) -> list[str]:
    return [r.headers["authorization"].removeprefix("Bearer ") for r in wire.requests]


async def test_a_local_server_without_a_key_is_sent_the_placeholder(
    wire: ChatCompletionsWire,
) -> None:
    """The SDK insists on a key; Ollama, llama.cpp, LM Studio ignore it."""
    wire.plan(Reply("from the settings' server"), Reply("from the agent's server"))
    settings = LLMSettings(openai=OpenAISettings(base_url=wire.base_url))
    providers = Providers(settings)
    try:
        await providers(agent(), "run_1").complete(ask())
        await providers(agent(base_url=wire.base_url + "/"), "run_1").complete(ask())
    finally:
        await providers.aclose()
    assert authorization(wire) == [PLACEHOLDER_KEY, PLACEHOLDER_KEY]


async def test_the_settings_key_goes_to_the_settings_server_only(
    wire: ChatCompletionsWire,
) -> None:
    """An agent pointed at a server of its own does not get the key meant for another."""
    wire.plan(Reply("a"), Reply("b"))
    settings = LLMSettings(openai=OpenAISettings(api_key=API_KEY, base_url=wire.base_url))
    providers = Providers(settings)
    elsewhere = f"http://localhost:{wire.url.rsplit(':', 1)[1]}/v1"  # the same wire, by name
    try:
        shared = providers(agent(), "run_1")
        assert providers(agent(), "run_2") is shared
        await shared.complete(ask())
        own = providers(agent(base_url=elsewhere), "run_1")
        assert own is not shared
        await own.complete(ask())
    finally:
        await providers.aclose()
    assert authorization(wire) == [API_KEY, PLACEHOLDER_KEY]


async def test_an_agents_key_comes_from_the_variable_it_names(
    wire: ChatCompletionsWire, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WIRE_VENDOR_API_KEY", "sk-from-the-environment")
    wire.plan(Reply("hi"))
    providers = Providers(LLMSettings())
    owner = agent(base_url=wire.base_url, api_key_env="WIRE_VENDOR_API_KEY")
    try:
        await providers(owner, "run_1").complete(ask())
        monkeypatch.delenv("WIRE_VENDOR_API_KEY")
        with pytest.raises(ProviderUnavailable, match="WIRE_VENDOR_API_KEY"):
            providers(agent(base_url=wire.url, api_key_env="WIRE_VENDOR_API_KEY"), "run_1")
    finally:
        await providers.aclose()
    assert authorization(wire) == ["sk-from-the-environment"]


def test_openais_own_api_without_a_key_says_what_to_set() -> None:
    with pytest.raises(ProviderUnavailable, match="LOOPWRIGHT_LLM__OPENAI__API_KEY") as caught:
        Providers(LLMSettings())(agent(), "run_1")
    assert "model.base_url" in str(caught.value)


async def test_refreshing_credentials_reads_the_rotated_key_file(
    wire: ChatCompletionsWire, tmp_path: Path
) -> None:
    key_file = tmp_path / "openai.key"
    key_file.write_text("sk-old\n")
    wire.plan(HttpError(401, "Incorrect API key provided", code="invalid_api_key"), Reply("hi"))
    settings = LLMSettings(openai=OpenAISettings(api_key_file=key_file, base_url=wire.base_url))
    providers = Providers(settings)
    provider = providers(agent(), "run_1")
    assert isinstance(provider, RefreshesCredentials)
    try:
        with pytest.raises(ProviderError) as refused:
            await provider.complete(ask())
        assert refused.value.error_class == "auth"
        key_file.write_text("sk-new\n")  # the secret was rotated
        await provider.refresh_credentials()
        response = await provider.complete(ask())
    finally:
        await providers.aclose()
    assert response.content == [TextBlock(text="hi")]
    assert authorization(wire) == ["sk-old", "sk-new"]


def test_openais_own_api_is_sent_max_completion_tokens() -> None:
    """Its reasoning models refuse `max_tokens`; no local server is known to need the new
    name, and some older ones read only the old."""
    assert OpenAIProvider("sk", base_url="https://api.openai.com/v1/")._openai_api
    assert not OpenAIProvider("sk", base_url="http://localhost:11434/v1")._openai_api


def test_a_model_config_names_a_key_variable_not_a_key() -> None:
    for bad in ("sk-abc", "openai_api_key", "DATABASE_URL", "LOOPWRIGHT_LLM__OPENAI__API_KEY"):
        with pytest.raises(ValueError, match="api_key_env"):
            ModelConfig(provider="openai", name="m", api_key_env=bad)
    with pytest.raises(ValueError, match="only for the openai provider"):
        ModelConfig(provider="anthropic", name="m", api_key_env="GROQ_API_KEY")
