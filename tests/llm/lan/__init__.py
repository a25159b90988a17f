"""A model provider written outside `app/`, the way a new one is: `lan`, a model server on
the local network that speaks Chat Completions at its settings' base URL, with a key of
its own (`LOOPWRIGHT_LLM__LAN__BASE_URL`, `…__API_KEY`). Its settings group, prices and
tiers are here; its wire is `wire.py`, loaded only when a pool is made. Registered with
`app.llm.providers.registry.register(PROVIDER)`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, SecretStr

from app.core.model_config import ModelConfig
from app.core.vocabulary import ModelTier
from app.llm.model_price import ModelPrice
from app.llm.provider import ProviderPool

BASE_URL_ENV = "LOOPWRIGHT_LLM__LAN__BASE_URL"


class LanSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    api_key: SecretStr | None = None


PRICES = {
    "lan-large": ModelPrice.of("2", "6", "2", "0.5", tier=ModelTier.LARGE),
    "lan-medium": ModelPrice.of("1", "3", "1", "0.25", tier=ModelTier.MEDIUM),
}
TIER_MODELS = {ModelTier.LARGE: "lan-large", ModelTier.MEDIUM: "lan-medium"}


class Lan:
    name = "lan"
    settings = LanSettings
    sdk_module = "tests.llm.lan.wire"
    own_models_only = True
    prices = PRICES
    tier_models = TIER_MODELS

    def pool(self, settings: LanSettings) -> ProviderPool:
        from tests.llm.lan.wire import LanProviders

        return LanProviders(settings)

    def missing_credentials(self, settings: LanSettings, model: ModelConfig | None) -> str | None:
        if settings.base_url is None:
            return f"no server is configured for `lan` models: set {BASE_URL_ENV}"
        return None


PROVIDER = Lan()
