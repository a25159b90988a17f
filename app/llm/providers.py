"""Picks the provider for an agent's model configuration.

Scripted providers are made per run execution (they count the faults they raised);
Anthropic clients are shared per base URL and closed with the process.
"""

from __future__ import annotations

from collections.abc import Callable

from app.config import LLMSettings
from app.llm.anthropic import AnthropicProvider
from app.llm.provider import Provider
from app.llm.scripted import ScriptedProvider
from app.schemas.agents import AgentRead

ProviderFactory = Callable[[AgentRead], Provider]


class ProviderUnavailable(Exception):
    """The agent's model needs a provider this process cannot offer (e.g. no API key)."""


class Providers:
    def __init__(self, settings: LLMSettings) -> None:
        self._settings = settings
        self._anthropic: dict[str | None, AnthropicProvider] = {}

    def __call__(self, agent: AgentRead) -> Provider:
        model = agent.model
        if model.provider == "scripted":
            assert model.script is not None  # the schema requires it
            return ScriptedProvider(model.script, model=model.name)
        key = self._settings.anthropic_api_key
        if key is None:
            raise ProviderUnavailable(
                "no Anthropic API key is configured (LOOPWRIGHT_LLM__ANTHROPIC_API_KEY)"
            )
        base_url = model.base_url or self._settings.anthropic_base_url
        if base_url not in self._anthropic:
            self._anthropic[base_url] = AnthropicProvider(key.get_secret_value(), base_url=base_url)
        return self._anthropic[base_url]

    async def aclose(self) -> None:
        for provider in self._anthropic.values():
            await provider.aclose()
        self._anthropic.clear()
