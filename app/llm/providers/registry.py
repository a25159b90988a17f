"""The registry of model providers: a provider's name (an agent's `model.provider`) maps
to its package's `ProviderKind`, which makes its pool from its own settings group, says
what a call lacks, ships its prices and tiers, and names its slow SDK import.

Adding a provider is one package under `app/llm/providers/` (see `kind.py`) and one line
in `SHIPPED`; a provider loaded from elsewhere (a test's) calls `register`. A provider
serves any model name (each request carries its own); an agent's fallback model
(`ModelConfig.fallback_model()`) is handed out like any model, by its own provider.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from app.core.config import LLMSettings
from app.core.model_config import ModelConfig, admit_provider, withdraw_provider
from app.core.vocabulary import ModelTier
from app.llm.model_price import ModelPrice
from app.llm.provider import ModelOwner, Provider, ProviderPool, ProviderUnavailable
from app.llm.providers import anthropic, openai, scripted
from app.llm.providers.kind import ProviderKind

SHIPPED: tuple[ProviderKind[Any], ...] = (anthropic.PROVIDER, openai.PROVIDER, scripted.PROVIDER)

KINDS: dict[str, ProviderKind[Any]] = {}


def register(kind: ProviderKind[Any]) -> None:
    """Makes `kind` a provider agents may name. The core's agent shapes check the name
    (`model_config.admit_provider`), and the core cannot import this registry."""
    KINDS[kind.name] = kind
    admit_provider(kind.name)


def unregister(name: str) -> None:
    """The provider named so is no longer one (a test's, at its end)."""
    del KINDS[name]
    withdraw_provider(name)


for _kind in SHIPPED:
    register(_kind)


def settings_of(settings: LLMSettings, kind: ProviderKind[Any]) -> BaseModel:
    """The provider's settings group, read and checked (a ValidationError names the bad
    field)."""
    group: BaseModel = kind.settings.model_validate(settings.group(kind.name))
    return group


def check_settings(settings: LLMSettings) -> None:
    """Refuses a group no provider owns (a provider that does not exist, or a setting of
    an older layout), and a group its provider refuses: said at start-up, not ignored."""
    for name in settings.model_extra or {}:
        if name not in KINDS:
            raise ValueError(
                f"LOOPWRIGHT_LLM__{name.upper()}: the settings of {name!r}, which no model "
                f"provider is named (the providers: {', '.join(KINDS)})"
            )
    for kind in KINDS.values():
        settings_of(settings, kind)


def shipped_prices() -> dict[str, ModelPrice]:
    """Every provider's list prices, keyed `provider/model`."""
    return {
        f"{kind.name}/{model}": price
        for kind in KINDS.values()
        for model, price in kind.prices.items()
    }


def shipped_tier_models() -> dict[str, dict[ModelTier, str]]:
    """Per provider that has them, the model of each tier a downgraded run moves to."""
    return {kind.name: dict(kind.tier_models) for kind in KINDS.values() if kind.tier_models}


def own_models_only(provider: str) -> bool:
    """Whether the provider's servers know only their own models (`ProviderKind`)."""
    kind = KINDS.get(provider)
    return kind is not None and kind.own_models_only


async def load_sdks(*providers: str) -> None:
    """Imports, on a thread, the SDKs of these providers that are not loaded yet: a run
    whose provider `warm_up` did not load (an agent's own server, no settings for it) would
    otherwise import it on the event loop, stalling every run of the process (and their
    lease heartbeats) for as long as it takes."""
    modules = [KINDS[p].sdk_module for p in providers if p in KINDS]
    missing = [module for module in modules if module is not None and module not in sys.modules]
    if missing:
        await asyncio.to_thread(lambda: [importlib.import_module(m) for m in missing])


def _missing(
    settings: LLMSettings, kind: ProviderKind[Any], model: ModelConfig | None
) -> str | None:
    return kind.missing_credentials(settings_of(settings, kind), model)


def missing_credentials(settings: LLMSettings) -> dict[str, str]:
    """The providers that cannot make a call as configured, with the fix for each."""
    found = {name: _missing(settings, kind, None) for name, kind in KINDS.items()}
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
        kind = KINDS.get(model.provider)
        missing = _missing(settings, kind, model) if kind is not None else None
        if missing is not None and missing not in seen:  # said once for both
            seen.add(missing)
            warnings.append(whose + missing)
    return warnings


class Providers:
    """Picks the provider for an agent's model: each provider name's pool is made on first
    use (so a provider without credentials matters only to the agents that use it), and
    every pool is closed with the process. The settings are checked when it is made."""

    def __init__(
        self, settings: LLMSettings, kinds: Mapping[str, ProviderKind[Any]] | None = None
    ) -> None:
        check_settings(settings)
        self._settings = settings
        self._kinds = KINDS if kinds is None else kinds
        self._pools: dict[str, ProviderPool] = {}

    def __call__(self, agent: ModelOwner, run_id: str) -> Provider:
        """The provider for the agent's model in this run; ProviderUnavailable when no
        provider of that name is registered or it lacks what it needs (e.g. a key)."""
        name = agent.model.provider
        pool = self._pools.get(name)
        if pool is None:
            kind = self._kinds.get(name)
            if kind is None:
                raise ProviderUnavailable(f"no model provider is named {name!r}")
            pool = self._pools[name] = kind.pool(settings_of(self._settings, kind))
        return pool(agent, run_id)

    def warm_up(self) -> threading.Thread | None:
        """Starts importing, on a thread of its own, the SDKs of the providers that have
        credentials: a first run's import would hold the event loop (and every other run
        and request of the process) for the ~2 s it takes."""
        missing = missing_credentials(self._settings)
        usable = [
            kind.sdk_module
            for name, kind in self._kinds.items()
            if kind.sdk_module is not None and name not in missing
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
