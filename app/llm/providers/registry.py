"""The registry of model providers: a provider's name (an agent's `model.provider`) maps
to the factory of its pool, which takes the LLM settings and reads its own group.

Adding a provider is one module (its `Provider`, its pool, its errors in neutral
classes), one entry in `FACTORIES`, and one settings group in `LLMSettings`. A provider
serves any model name (each request carries its own); an agent's fallback model
(`ModelConfig.fallback_model()`) is handed out like any model, by its own provider.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
from collections.abc import Callable

from app.core.config import LLMSettings
from app.core.model_config import ModelConfig
from app.llm.provider import ModelOwner, Provider, ProviderPool, ProviderUnavailable
from app.llm.providers import anthropic_settings, openai_settings
from app.llm.providers.scripted import ScriptedProviders

PoolFactory = Callable[[LLMSettings], ProviderPool]


def _anthropic(settings: LLMSettings) -> ProviderPool:
    # The SDK loads when a process can use it (`Providers.warm_up`) or with the first run
    # that needs it, not with every process (~2 s).
    from app.llm.providers.anthropic import AnthropicProviders

    return AnthropicProviders(settings.anthropic)


def _openai(settings: LLMSettings) -> ProviderPool:
    from app.llm.providers.openai import OpenAIProviders  # the SDK: as for Anthropic's

    return OpenAIProviders(settings.openai)


FACTORIES: dict[str, PoolFactory] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "scripted": lambda settings: ScriptedProviders(),
}

# The module of each provider whose import is slow enough to load in the background.
SLOW_IMPORTS: dict[str, str] = {
    "anthropic": "app.llm.providers.anthropic",
    "openai": "app.llm.providers.openai",
}

# The providers whose servers know only their own models (a local server serves what it
# loaded): a call that would name a model of its own accord, as the compaction summary's
# does (`LOOPWRIGHT_COMPACTION__SUMMARY_MODEL`, a Claude model), names the agent's instead.
OWN_MODELS_ONLY: frozenset[str] = frozenset({"openai"})

# What each provider lacks for a call to a model (None: nothing), read from its settings
# group and the model's config (None: a model with nothing of its own).
MissingCredentials = Callable[[LLMSettings, ModelConfig | None], str | None]
MISSING_CREDENTIALS: dict[str, MissingCredentials] = {
    "anthropic": lambda settings, model: anthropic_settings.missing_credentials(settings.anthropic),
    "openai": lambda settings, model: openai_settings.missing_credentials(settings.openai, model),
}


async def load_sdks(*providers: str) -> None:
    """Imports, on a thread, the SDKs of these providers that are not loaded yet: a run
    whose provider `warm_up` did not load (an agent's own server, no settings for it) would
    otherwise import it on the event loop, stalling every run of the process (and their
    lease heartbeats) for as long as it takes."""
    modules = [SLOW_IMPORTS[p] for p in providers if p in SLOW_IMPORTS]
    missing = [module for module in modules if module not in sys.modules]
    if missing:
        await asyncio.to_thread(lambda: [importlib.import_module(m) for m in missing])


def missing_credentials(settings: LLMSettings) -> dict[str, str]:
    """The providers that cannot make a call as configured, with the fix for each."""
    found = {name: check(settings, None) for name, check in MISSING_CREDENTIALS.items()}
    return {name: missing for name, missing in found.items() if missing is not None}


def provider_warnings(settings: LLMSettings, agent: ModelOwner) -> list[str]:
    """Why the agent's runs would fail at their first model call (or at their first call
    to the fallback model), as configured now."""
    models = [("", agent.model)]
    fallback = agent.model.fallback_model()
    if fallback is not None:
        models.append(("its fallback model: ", fallback))
    warnings: list[str] = []
    seen: set[str] = set()
    for whose, model in models:
        check = MISSING_CREDENTIALS.get(model.provider)
        missing = check(settings, model) if check is not None else None
        if missing is not None and missing not in seen:  # said once for both
            seen.add(missing)
            warnings.append(whose + missing)
    return warnings


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

    def warm_up(self) -> threading.Thread | None:
        """Starts importing, on a thread of its own, the SDKs of the providers that have
        credentials: a first run's import would hold the event loop (and every other run
        and request of the process) for the ~2 s it takes."""
        usable = [
            module
            for name, module in SLOW_IMPORTS.items()
            if name in self._factories and name not in missing_credentials(self._settings)
        ]
        if not usable:
            return None
        thread = threading.Thread(
            target=lambda: [importlib.import_module(module) for module in usable],
            name="provider-imports",
            daemon=True,
        )
        thread.start()
        return thread

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.aclose()
