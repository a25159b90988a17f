"""The `scripted` provider: plays the turns an agent's model config declares (`provider`),
its faults in a dialect of its own (`faults`); the demo and the tests' double. It needs
no settings, no SDK, and has no price until one is set."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from app.core.model_config import ModelConfig
from app.core.vocabulary import ModelTier
from app.llm.model_price import ModelPrice
from app.llm.provider import ProviderPool
from app.llm.providers.scripted.provider import ScriptedProviders


class NoSettings(BaseModel):
    """A provider without settings: a group given for it is refused."""

    model_config = ConfigDict(extra="forbid")


class Scripted:
    name = "scripted"
    settings = NoSettings
    sdk_module = None
    own_models_only = False
    prices: dict[str, ModelPrice] = {}
    tier_models: dict[ModelTier, str] = {}

    def pool(self, settings: NoSettings) -> ProviderPool:
        return ScriptedProviders()

    def missing_credentials(self, settings: NoSettings, model: ModelConfig | None) -> str | None:
        return None


PROVIDER = Scripted()
