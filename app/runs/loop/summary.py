"""The summariser compaction calls: one request to a cheap model over the folded messages,
rendered as plain text (they need not form a valid conversation on their own)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from app.core.config import CompactionSettings
from app.core.messages import Message, TextBlock, ToolUseBlock
from app.core.model_config import ModelConfig
from app.llm.provider import LLMRequest, Provider
from app.llm.providers.registry import own_models_only
from app.runs.loop.compaction import Summarise
from app.telemetry import spans

SUMMARY_SYSTEM_PROMPT = (
    "You condense the earlier part of an AI agent's working session so the agent can carry "
    "on without it. Write a compact summary: the goal, what was done, facts and results "
    "found, decisions taken, and what remains open. Keep names, identifiers, numbers, paths "
    "and URLs exactly as written. Write only the summary."
)
# A huge tool result says little more at its end than at its start; bounding each block
# keeps the summary call within a cheap model's window.
BLOCK_MAX_CHARS = 8_000


def render(messages: Sequence[Message]) -> str:
    lines = []
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                body = f"{message.role}: {block.text}"
            elif isinstance(block, ToolUseBlock):
                body = f"{message.role} called {block.name} {json.dumps(block.input)}"
            else:
                outcome = "failed" if block.is_error else "returned"
                body = f"tool call {block.tool_use_id} {outcome}: {block.content}"
            lines.append(body[:BLOCK_MAX_CHARS])
    return "\n\n".join(lines)


def summary_settings(settings: CompactionSettings, model: ModelConfig) -> CompactionSettings:
    """The settings an agent's summaries use: the summary model, unless the agent's provider
    serves only its own models (a local server): then the agent's model summarises."""
    if own_models_only(model.provider):
        return settings.model_copy(update={"summary_model": model.name})
    return settings


def summary_request(messages: Sequence[Message], settings: CompactionSettings) -> LLMRequest:
    return LLMRequest(
        model=settings.summary_model,
        system=SUMMARY_SYSTEM_PROMPT,
        messages=[Message.user_text(render(messages))],
        max_tokens=settings.summary_max_tokens,
        timeout_s=settings.summary_timeout_s,
    )


def llm_summariser(
    provider: Provider, settings: CompactionSettings, *, provider_name: str = "unknown"
) -> Summarise:
    """A `summarise` for `Compactor` that asks `provider`'s summary model; a slow call
    times out, and either failure sends compaction to its truncation fallback. When
    tracing, each call is a `chat` span (`provider_name`: its `gen_ai.provider.name`)."""

    async def summarise(messages: Sequence[Message]) -> str:
        request = summary_request(messages, settings)
        with spans.chat(
            provider_name, request.model, request.max_tokens, purpose="compaction_summary"
        ) as span:
            async with asyncio.timeout(settings.summary_timeout_s):
                response = await provider.complete(request)
            span.answered(response, provider_name)
        return "".join(b.text for b in response.content if isinstance(b, TextBlock))

    return summarise
