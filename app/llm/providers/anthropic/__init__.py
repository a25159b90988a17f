"""The `anthropic` provider: Anthropic's Messages API through its SDK (`wire`), its errors
in neutral terms (`errors`), its settings group (`settings`), its prices and tiers
(`prices`)."""

from __future__ import annotations

from app.core.model_config import ModelConfig
from app.llm.provider import ProviderPool
from app.llm.providers.anthropic.prices import PRICES, TIER_MODELS
from app.llm.providers.anthropic.settings import AnthropicSettings, missing_credentials


class Anthropic:
    name = "anthropic"
    settings = AnthropicSettings
    sdk_module = "app.llm.providers.anthropic.wire"
    own_models_only = False
    prices = PRICES
    tier_models = TIER_MODELS

    def pool(self, settings: AnthropicSettings) -> ProviderPool:
        # The SDK loads when a process can use it (`Providers.warm_up`) or with the first run
        # that needs it, not with every process (~2 s).
        from app.llm.providers.anthropic.wire import AnthropicProviders

        return AnthropicProviders(settings)

    def missing_credentials(
        self, settings: AnthropicSettings, model: ModelConfig | None
    ) -> str | None:
        return missing_credentials(settings)


PROVIDER = Anthropic()
