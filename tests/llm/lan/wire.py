"""The `lan` provider's wire: one streamed Chat Completions call over plain httpx (text
answers only: enough for the run it is tested with), its failures as neutral
ProviderErrors through the shared HTTP status rules."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx

from app.core.messages import Message, TextBlock
from app.llm.provider import (
    LLMRequest,
    LLMResponse,
    ModelOwner,
    Provider,
    ProviderError,
    ProviderUnavailable,
    TextSink,
    Usage,
    UsageSink,
)
from app.llm.providers import http_status

if TYPE_CHECKING:
    from tests.llm.lan import LanSettings


def _chat_messages(system: str, messages: list[Message]) -> list[dict[str, str]]:
    chat = [{"role": "system", "content": system}]
    for message in messages:
        text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        chat.append({"role": message.role, "content": text})
    return chat


class LanProvider:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        body = {
            "model": request.model,
            "messages": _chat_messages(request.system, request.messages),
            "max_tokens": request.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        text, usage = "", Usage()
        try:
            async with self._client.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    message = (await response.aread()).decode()
                    headers = dict(response.headers)
                    raise http_status.http_error(response.status_code, message, headers)
                async for line in response.aiter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk: dict[str, Any] = json.loads(line.removeprefix("data: "))
                    for choice in chunk.get("choices") or []:
                        delta = choice["delta"].get("content") or ""
                        text += delta
                        if delta and on_text is not None:
                            await on_text(delta)
                    if chunk.get("usage"):
                        counts = chunk["usage"]
                        usage = Usage(counts["prompt_tokens"], counts["completion_tokens"])
        except httpx.TransportError as exc:
            raise ProviderError("connection", f"lan: {exc!r}") from exc
        if on_usage is not None:
            on_usage(usage)
        return LLMResponse([TextBlock(text=text)], "end_turn", usage, request.model)


class LanProviders:
    """One client for the settings' server, shared by every run."""

    def __init__(self, settings: LanSettings) -> None:
        if settings.base_url is None:
            raise ProviderUnavailable("no server is configured for `lan` models")
        key = settings.api_key.get_secret_value() if settings.api_key else ""
        self._client = httpx.AsyncClient(
            base_url=settings.base_url, headers={"authorization": f"Bearer {key}"}
        )

    def __call__(self, owner: ModelOwner, run_id: str) -> Provider:
        return LanProvider(self._client)

    async def aclose(self) -> None:
        await self._client.aclose()
