"""The registry of model providers: a provider's name (an agent's `model.provider`) maps
to the factory of its pool, which takes the LLM settings and reads its own group.

Adding a provider is one module (its `Provider`, its pool, its errors in neutral
classes), one entry in `FACTORIES`, and one settings group in `LLMSettings`. A provider
serves any model name (each request carries its own), so an agent's fallback model
(`ModelConfig.fallback_name`) goes through the same provider.
"""

from __future__ import annotations

from collections.abc import Callable

from app.core.config import LLMSettings
from app.llm.provider import ModelOwner, Provider, ProviderPool, ProviderUnavailable
from app.llm.providers.anthropic import AnthropicProviders
from app.llm.providers.scripted import ScriptedProviders

PoolFactory = Callable[[LLMSettings], ProviderPool]

FACTORIES: dict[str, PoolFactory] = {
    "anthropic": lambda settings: AnthropicProviders(settings.anthropic),
    "scripted": lambda settings: ScriptedProviders(),
}


class Providers:
    """Picks the provider for an agent's model: each provider name's pool is made on first
    use (so a provider without credentials matters only to the agents that use it), and
    every pool is closed with the process."""

    def __init__(
        self, settings: LLMSettings, factories: dict[str, PoolFactory] | None = None
    ) -> None:
        self._settings = settings
        self._factories = FACTORIES if factories is None else factories
        self._pools: dict[str, ProviderPool] = {}

    def __call__(self, agent: ModelOwner, run_id: str) -> Provider:
        """The provider for the agent's model in this run; ProviderUnavailable when no
        provider of that name is registered or it lacks what it needs (e.g. a key)."""
        name = agent.model.provider
        pool = self._pools.get(name)
        if pool is None:
            factory = self._factories.get(name)
            if factory is None:
                raise ProviderUnavailable(f"no model provider is named {name!r}")
            pool = self._pools[name] = factory(self._settings)
        return pool(agent, run_id)

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.aclose()
