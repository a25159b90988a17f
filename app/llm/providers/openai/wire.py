"""The OpenAI-compatible provider: one streamed Chat Completions call through the official
SDK, to OpenAI's API or any server that speaks it (vLLM, Ollama, llama.cpp, LM Studio,
other vendors), with our transcript translated to chat messages and every failure reported
as a neutral ProviderError (`errors` reads the statuses and messages); and its pool,
which finds each model's server and key (`settings`).

Translation, both ways:
  system prompt          a `system` message, first
  text, tool_use         an `assistant` message: its text, and `tool_calls` whose
                         `arguments` are the input as a JSON string
  tool_result            a `tool` message per result, before the user's text; an error
                         result is one too, its content prefixed with `ERROR_PREFIX`
  ToolChoice             auto -> "auto", any -> "required", tool -> that function
  finish_reason          tool_calls -> tool_use, stop -> end_turn, length -> max_tokens,
                         content_filter -> refusal
  usage                  prompt_tokens less the cached ones -> input, cached -> cache read

A tool call whose arguments are not a JSON object (a small model's slip, or an answer cut
off at `max_tokens`) is kept with its text under `UNPARSED_ARGUMENTS`: the tool runner
answers it with an error quoting the text, so the model can correct the call, and the
transcript stays valid. It goes back to the server with `{}` as its arguments (some servers
parse the history's arguments, and would refuse every later request).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2  # the SDK's transport
import openai
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionChunk,
    ChatCompletionMessageParam,
    ChatCompletionMessageToolCallParam,
    ChatCompletionToolChoiceOptionParam,
    ChatCompletionToolParam,
)
from openai.types.completion_usage import CompletionUsage

from app.core.messages import (
    UNPARSED_ARGUMENTS,
    Block,
    Message,
    TextBlock,
    ToolUseBlock,
    unparsed_arguments,
)
from app.llm.provider import (
    LLMRequest,
    LLMResponse,
    ModelOwner,
    ProviderError,
    ProviderUnavailable,
    TextSink,
    ToolChoice,
    ToolSpec,
    Usage,
    UsageSink,
)
from app.llm.providers.openai.errors import status_error
from app.llm.providers.openai.settings import (
    KEY_ENV,
    OPENAI_BASE_URL,
    PLACEHOLDER_KEY,
    Endpoint,
    OpenAISettings,
    endpoint,
    has_settings_key,
    missing_credentials,
)
from app.llm.providers.sdk_client import SdkClientOwner, transport_cause

ERROR_PREFIX = "[tool error] "  # a failed tool's result, as the model reads it
STOP_REASONS = {
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class OpenAIProvider(SdkClientOwner[openai.AsyncOpenAI]):
    """The `Provider` for a Chat Completions server.

    The SDK never retries (`max_retries=0`): the caller's policy does. `LLMRequest.timeout_s`
    bounds each wait on the network (connecting, and every read while the answer streams),
    not the whole call. OpenAI's own API is sent `max_completion_tokens` (its reasoning
    models refuse `max_tokens`); any other server `max_tokens`, which all of them read.
    """

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = OPENAI_BASE_URL,
        timeout_s: float = 600.0,
        key_source: Callable[[], str] | None = None,
    ) -> None:
        self._openai_api = base_url.rstrip("/") == OPENAI_BASE_URL
        super().__init__(api_key, base_url=base_url, timeout_s=timeout_s, key_source=key_source)

    def _new_client(self, api_key: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=api_key, base_url=self._base_url, max_retries=0, timeout=self._timeout_s
        )

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        try:
            return await self._stream(request, on_text, on_usage)
        except openai.APIStatusError as exc:
            error = _error_object(exc.body)
            text = error.get("message") if isinstance(error.get("message"), str) else None
            headers = dict(exc.response.headers)
            raise status_error(exc.status_code, error, text or exc.message, headers) from exc
        # Timeouts first: the SDK's and httpx's timeout errors subclass their connection errors.
        except (openai.APITimeoutError, httpx2.TimeoutException) as exc:
            message = f"openai: nothing received for {request.timeout_s:g}s ({_cause(exc)})"
            raise ProviderError("timeout", message) from exc
        except (openai.APIConnectionError, httpx2.RequestError) as exc:
            raise ProviderError("connection", f"openai: connection failed: {_cause(exc)}") from exc
        except openai.APIError as exc:  # an error object sent inside a stream begun with 200
            error = _error_object(exc.body)
            raise status_error(0, error, exc.message, {}, mid_stream=True) from exc

    async def _stream(
        self, request: LLMRequest, on_text: TextSink | None, on_usage: UsageSink | None
    ) -> LLMResponse:
        answer = _Answer(request.model)
        stream = await self._client.chat.completions.create(
            model=request.model,
            messages=chat_messages(request.system, request.messages),
            tools=[tool_param(t) for t in request.tools] or openai.omit,
            tool_choice=tool_choice_param(request.tool_choice) if request.tools else openai.omit,
            stream=True,
            stream_options={"include_usage": True},
            max_completion_tokens=request.max_tokens if self._openai_api else openai.omit,
            max_tokens=openai.omit if self._openai_api else request.max_tokens,
            timeout=request.timeout_s,
        )
        async with stream:
            async for chunk in stream:
                text = answer.add(chunk)
                if text and on_text is not None:
                    await on_text(text)
                if chunk.usage is not None and on_usage is not None:
                    on_usage(answer.usage)
        if answer.finish_reason is None:
            # The stream closed cleanly but early: what arrived is not the whole answer.
            raise ProviderError("connection", "openai: the stream ended before a finish_reason")
        return answer.response()


@dataclass
class _Call:
    """A tool call as its deltas arrive: its id and name first, its arguments in pieces."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Answer:
    """One streamed answer, put together from its chunks (the first choice's)."""

    model: str
    text: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)

    def add(self, chunk: ChatCompletionChunk) -> str:
        """Take in one chunk; the text it adds."""
        if chunk.model:
            self.model = chunk.model
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        text = ""
        for choice in chunk.choices or []:
            if choice.index not in (0, None):
                continue  # one answer is asked for; a server that sends more is not read
            delta = choice.delta
            if delta is not None:
                text = (delta.content or "") + (delta.refusal or "")
                for call in delta.tool_calls or []:
                    self._add_call(call.index, call.id, call.function)
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
        if text:
            self.text.append(text)
        return text

    def _add_call(self, index: int | None, call_id: str | None, function: Any) -> None:
        if index is None:  # servers that leave it out tell calls apart by their ids
            known = [i for i, call in self.calls.items() if call_id and call.id == call_id]
            if known:
                index = known[0]
            else:
                index = len(self.calls) if call_id or not self.calls else max(self.calls)
        call = self.calls.setdefault(index, _Call())
        call.id = call.id or call_id or ""
        if function is not None:
            call.name = call.name or function.name or ""
            if function.arguments:
                call.arguments.append(function.arguments)

    def response(self) -> LLMResponse:
        content: list[Block] = []
        text = "".join(self.text)
        if text:
            content.append(TextBlock(text=text))
        for _, call in sorted(self.calls.items()):
            call_id = call.id or f"call_{uuid.uuid4().hex[:24]}"
            content.append(ToolUseBlock(id=call_id, name=call.name, input=parse_arguments(call)))
        reason = self.finish_reason or "stop"
        stop_reason = STOP_REASONS.get(reason, reason)
        if stop_reason == "end_turn" and self.calls:  # servers that say `stop` after a call
            stop_reason = "tool_use"
        return LLMResponse(content, stop_reason, self.usage, self.model)


def parse_arguments(call: _Call) -> dict[str, Any]:
    """The call's input; arguments that are not a JSON object are kept as their text under
    `UNPARSED_ARGUMENTS` (see the module's docstring). None at all is no argument."""
    raw = "".join(call.arguments)
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return parsed
    return {UNPARSED_ARGUMENTS: raw}


def _usage(usage: CompletionUsage) -> Usage:
    """`prompt_tokens` counts the cached ones too; they are read from the cache (and priced
    as such), the rest afresh."""
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    return Usage(
        input_tokens=max(0, (usage.prompt_tokens or 0) - cached),
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached,
    )


def _error_object(body: object) -> dict[str, Any]:
    """The JSON error object of an error's body: its `error` member, or the body itself
    (vLLM's older shape, `{"object": "error", "message": ...}`)."""
    if isinstance(body, dict):
        inner = body.get("error")
        return inner if isinstance(inner, dict) else body
    return {}


def _cause(exc: Exception) -> str:
    return transport_cause(exc, openai.APIError)


def chat_messages(system: str, messages: Iterable[Message]) -> list[ChatCompletionMessageParam]:
    """Our transcript as chat messages (see the module's docstring)."""
    chat: list[ChatCompletionMessageParam] = []
    if system:
        chat.append({"role": "system", "content": system})
    for message in messages:
        texts = [b.text for b in message.content if isinstance(b, TextBlock)]
        if message.role == "assistant":
            calls = [_tool_call_param(b) for b in message.tool_uses]
            assistant: ChatCompletionAssistantMessageParam = {
                "role": "assistant",
                "content": "".join(texts) or (None if calls else ""),
            }
            if calls:
                assistant["tool_calls"] = calls
            chat.append(assistant)
            continue
        for block in message.content:
            if block.type == "tool_result":
                content = ERROR_PREFIX + block.content if block.is_error else block.content
                chat.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
        if texts:
            chat.append({"role": "user", "content": "\n\n".join(texts)})
    return chat


def _tool_call_param(block: ToolUseBlock) -> ChatCompletionMessageToolCallParam:
    unparsed = unparsed_arguments(block) is not None
    arguments = "{}" if unparsed else json.dumps(block.input, ensure_ascii=False)
    return {
        "id": block.id,
        "type": "function",
        "function": {"name": block.name, "arguments": arguments},
    }


def tool_param(tool: ToolSpec) -> ChatCompletionToolParam:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    }


def tool_choice_param(choice: ToolChoice | None) -> ChatCompletionToolChoiceOptionParam:
    if choice is None or choice.type == "auto":
        return "auto"
    if choice.type == "any":
        return "required"
    if choice.name is None:
        raise ValueError("ToolChoice(type='tool') needs the tool's name")
    return {"type": "function", "function": {"name": choice.name}}


class OpenAIProviders:
    """The `ProviderPool` of `openai` models: one provider per server and key source
    (`settings.Endpoint`), shared by every run and closed with the process."""

    def __init__(self, settings: OpenAISettings) -> None:
        self._settings = settings
        self._providers: dict[Endpoint, OpenAIProvider] = {}

    def __call__(self, owner: ModelOwner, run_id: str) -> OpenAIProvider:
        where = endpoint(self._settings, owner.model)
        if where not in self._providers:
            missing = missing_credentials(self._settings, owner.model)
            if missing is not None:
                raise ProviderUnavailable(missing)

            def key() -> str:
                return self._key(where)

            self._providers[where] = OpenAIProvider(key(), base_url=where.base_url, key_source=key)
        return self._providers[where]

    def _key(self, where: Endpoint) -> str:
        """The key as configured now, for this server; the placeholder for one that
        takes none."""
        if where.key_env is not None:
            value = os.environ.get(where.key_env)
            if not value:
                raise ProviderUnavailable(
                    f"the model's api_key_env names {where.key_env}, which is not set where "
                    "the workers run"
                )
            return value
        settings = self._settings
        if where.settings_key and has_settings_key(settings):
            if settings.api_key_file is not None:
                return _read_key_file(settings.api_key_file)
            assert settings.api_key is not None
            return settings.api_key.get_secret_value()
        return PLACEHOLDER_KEY

    async def aclose(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()
        self._providers.clear()


def _read_key_file(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise ProviderUnavailable(
            f"cannot read the OpenAI key file ({KEY_ENV}_FILE): {exc}"
        ) from exc
