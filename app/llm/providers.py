"""Picks the provider for an agent's model configuration.

A scripted provider is kept per run (it counts the faults it raised, so a run retried in
this process gets past them); Anthropic clients are shared per base URL and closed with
the process. A provider serves any model name (each request carries its own), so an
agent's fallback model (`ModelConfig.fallback_name`) goes through the same provider.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from app.core.config import LLMSettings
from app.core.model_config import ModelConfig
from app.llm.anthropic import AnthropicProvider
from app.llm.provider import Provider
from app.llm.scripted import ScriptedProvider

SCRIPTED_KEPT = 4096


class ModelOwner(Protocol):
    """Whose model a provider serves: an agent, by id and version, and its model config."""

    @property
    def id(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def model(self) -> ModelConfig: ...


class ProviderUnavailable(Exception):
    """The agent's model needs a provider this process cannot offer (e.g. no API key)."""


class Providers:
    def __init__(self, settings: LLMSettings) -> None:
        self._settings = settings
        self._anthropic: dict[str | None, AnthropicProvider] = {}
        self._scripted: OrderedDict[tuple[str, int, str], ScriptedProvider] = OrderedDict()

    def __call__(self, agent: ModelOwner, run_id: str) -> Provider:
        model = agent.model
        if model.provider == "scripted":
            assert model.script is not None  # the schema requires it
            slot = (agent.id, agent.version, run_id)
            if slot not in self._scripted:
                self._scripted[slot] = ScriptedProvider(model.script)
                if len(self._scripted) > SCRIPTED_KEPT:
                    self._scripted.popitem(last=False)
            self._scripted.move_to_end(slot)
            return self._scripted[slot]
        base_url = model.base_url or self._settings.anthropic_base_url
        if base_url not in self._anthropic:
            self._anthropic[base_url] = AnthropicProvider(
                self._anthropic_key(), base_url=base_url, key_source=self._anthropic_key
            )
        return self._anthropic[base_url]

    def _anthropic_key(self) -> str:
        """The key file's current content when one is configured, else the key."""
        key_file = self._settings.anthropic_api_key_file
        if key_file is not None:
            try:
                return key_file.read_text().strip()
            except OSError as exc:
                raise ProviderUnavailable(f"cannot read the Anthropic key file: {exc}") from exc
        key = self._settings.anthropic_api_key
        if key is None:
            raise ProviderUnavailable(
                "no Anthropic API key is configured (LOOPWRIGHT_LLM__ANTHROPIC_API_KEY)"
            )
        return key.get_secret_value()

    async def aclose(self) -> None:
        for provider in self._anthropic.values():
            await provider.aclose()
        self._anthropic.clear()
