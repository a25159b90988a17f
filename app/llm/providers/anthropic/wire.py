"""The Anthropic provider: one streamed Messages API call through the official SDK, with
our transcript translated to its wire shapes and every failure reported as a neutral
ProviderError (`errors` reads the API's statuses and messages); and its pool,
which reads the key (or the key file) from its settings group (`settings`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import anthropic
import httpx2  # the SDK's transport: its errors surface raw once the body is streaming
from anthropic.types import ContentBlockParam, MessageParam, ToolChoiceParam, ToolParam

from app.core.messages import Block, Message, TextBlock, ToolUseBlock
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
from app.llm.providers.anthropic.errors import status_error
from app.llm.providers.anthropic.settings import KEY_ENV, AnthropicSettings, missing_credentials
from app.llm.providers.sdk_client import SdkClientOwner, transport_cause


class AnthropicProvider(SdkClientOwner[anthropic.AsyncAnthropic]):
    """The `Provider` for Anthropic's Messages API.

    The SDK never retries (`max_retries=0`): the caller's policy does. `LLMRequest.timeout_s`
    bounds each wait on the network (connecting, and every read while the answer streams),
    not the whole call, so a long answer that keeps streaming is not cut off.
    """

    def _new_client(self, api_key: str) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
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
        except anthropic.APIStatusError as exc:
            # A status below 400 is an `event: error` in a stream that began with 200.
            raise status_error(
                exc.status_code,
                exc.type or "unknown_error",
                exc.api_message or exc.message,
                dict(exc.response.headers),
                mid_stream=exc.status_code < 400,
            ) from exc
        # Timeouts first: the SDK's and httpx's timeout errors subclass their connection errors.
        except (anthropic.APITimeoutError, httpx2.TimeoutException) as exc:
            message = f"anthropic: nothing received for {request.timeout_s:g}s ({_cause(exc)})"
            raise ProviderError("timeout", message) from exc
        except (anthropic.APIConnectionError, httpx2.RequestError) as exc:
            raise ProviderError(
                "connection", f"anthropic: connection failed: {_cause(exc)}"
            ) from exc

    async def _stream(
        self, request: LLMRequest, on_text: TextSink | None, on_usage: UsageSink | None
    ) -> LLMResponse:
        finished = False
        started = Usage()
        async with self._client.messages.stream(
            model=request.model,
            max_tokens=request.max_tokens,
            messages=[_message_param(m) for m in request.messages],
            system=request.system or anthropic.omit,
            tools=[_tool_param(t) for t in request.tools] or anthropic.omit,
            tool_choice=_tool_choice_param(request.tool_choice),
            timeout=request.timeout_s,
        ) as stream:
            async for event in stream:
                if event.type == "text" and on_text is not None:
                    await on_text(event.text)
                elif event.type == "message_start" and on_usage is not None:
                    started = _usage(event.message.usage)
                    on_usage(started)
                elif event.type == "message_delta" and on_usage is not None:
                    # The output so far (a running total); the input is as it started.
                    on_usage(replace(started, output_tokens=event.usage.output_tokens))
                elif event.type == "message_stop":
                    finished = True
            if not finished:
                # The connection closed cleanly but early: what arrived is not the whole answer.
                raise ProviderError("connection", "anthropic: the stream ended before message_stop")
            message = await stream.get_final_message()
        content: list[Block] = []
        for block in message.content:
            if block.type == "text":
                content.append(TextBlock(text=block.text))
            elif block.type == "tool_use":
                tool_input = cast(dict[str, Any], block.input)
                content.append(ToolUseBlock(id=block.id, name=block.name, input=tool_input))
            # Other block types (thinking, server tools) are never asked for, so never kept.
        return LLMResponse(
            content=content,
            stop_reason=message.stop_reason or "end_turn",
            usage=_usage(message.usage),
            model=message.model,
        )


def _usage(usage: anthropic.types.Usage) -> Usage:
    """Anthropic counts cached prompt tokens apart from `input_tokens`; absent, none."""
    return Usage(
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_creation_input_tokens or 0,
        usage.cache_read_input_tokens or 0,
    )


class AnthropicProviders:
    """The `ProviderPool` of Anthropic: one provider per base URL (the agent's model
    config's, else the settings'), shared by every run and closed with the process. The
    key is the key file's content when one is configured (read again after a 401, so a
    rotated secret is picked up without a restart), else the configured key."""

    def __init__(self, settings: AnthropicSettings) -> None:
        self._settings = settings
        self._providers: dict[str | None, AnthropicProvider] = {}

    def __call__(self, owner: ModelOwner, run_id: str) -> AnthropicProvider:
        base_url = owner.model.base_url or self._settings.base_url
        if base_url not in self._providers:
            self._providers[base_url] = AnthropicProvider(
                self.api_key(), base_url=base_url, key_source=self.api_key
            )
        return self._providers[base_url]

    def api_key(self) -> str:
        """The key as configured now; ProviderUnavailable when there is none to read."""
        if self._settings.api_key_file is not None:
            return _read_key_file(self._settings.api_key_file)
        missing = missing_credentials(self._settings)
        if missing is not None or self._settings.api_key is None:
            raise ProviderUnavailable(missing or "no Anthropic API key")
        return self._settings.api_key.get_secret_value()

    async def aclose(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()
        self._providers.clear()


def _read_key_file(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise ProviderUnavailable(
            f"cannot read the Anthropic key file ({KEY_ENV}_FILE): {exc}"
        ) from exc


def _cause(exc: Exception) -> str:
    return transport_cause(exc, anthropic.APIError)


def _message_param(message: Message) -> MessageParam:
    blocks: list[ContentBlockParam] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolUseBlock):
            blocks.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
            )
        else:
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block.tool_use_id,
                    "content": block.content,
                    "is_error": block.is_error,
                }
            )
    if message.role == "user":
        return {"role": "user", "content": blocks}
    return {"role": "assistant", "content": blocks}


def _tool_param(tool: ToolSpec) -> ToolParam:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}


def _tool_choice_param(choice: ToolChoice | None) -> ToolChoiceParam | anthropic.Omit:
    if choice is None:
        return anthropic.omit
    if choice.type == "tool":
        if choice.name is None:
            raise ValueError("ToolChoice(type='tool') needs the tool's name")
        return {"type": "tool", "name": choice.name}
    if choice.type == "any":
        return {"type": "any"}
    return {"type": "auto"}
