"""The `openai` provider: OpenAI's Chat Completions API, or any server that speaks it
(vLLM, Ollama, llama.cpp, LM Studio, other vendors), through OpenAI's SDK (`wire`); its
errors in neutral terms (`errors`), its settings group and where each model is reached
(`settings`), its prices and tiers (`prices`)."""

from __future__ import annotations

from app.core.model_config import ModelConfig
from app.llm.provider import ProviderPool
from app.llm.providers.openai.prices import PRICES, TIER_MODELS
from app.llm.providers.openai.settings import OpenAISettings, missing_credentials


class OpenAI:
    name = "openai"
    settings = OpenAISettings
    sdk_module = "app.llm.providers.openai.wire"
    own_models_only = True  # a local server serves only what it loaded
    prices = PRICES
    tier_models = TIER_MODELS

    def pool(self, settings: OpenAISettings) -> ProviderPool:
        from app.llm.providers.openai.wire import OpenAIProviders  # the SDK: as Anthropic's

        return OpenAIProviders(settings)

    def missing_credentials(
        self, settings: OpenAISettings, model: ModelConfig | None
    ) -> str | None:
        return missing_credentials(settings, model)


PROVIDER = OpenAI()
