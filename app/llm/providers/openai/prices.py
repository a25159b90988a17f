"""OpenAI's list prices (standard tier, as of 2025-08) and the model of each tier a
downgraded run moves to. A model another server serves (a local one) has no price."""

from __future__ import annotations

from app.core.vocabulary import ModelTier
from app.llm.model_price import ModelPrice

_LARGE, _MEDIUM, _SMALL = ModelTier.LARGE, ModelTier.MEDIUM, ModelTier.SMALL

# Input, output, cache writes (not charged apart: the input's price), cached input.
PRICES: dict[str, ModelPrice] = {
    "gpt-4.1": ModelPrice.of("2", "8", "2", "0.50", tier=_LARGE),
    "gpt-4.1-mini": ModelPrice.of("0.40", "1.60", "0.40", "0.10", tier=_MEDIUM),
    "gpt-4.1-nano": ModelPrice.of("0.10", "0.40", "0.10", "0.025", tier=_SMALL),
    "gpt-4o": ModelPrice.of("2.50", "10", "2.50", "1.25", tier=_LARGE),
    "gpt-4o-2024-05-13": ModelPrice.of("5", "15", "5", "5", tier=_LARGE),
    "gpt-4o-mini": ModelPrice.of("0.15", "0.60", "0.15", "0.075", tier=_SMALL),
    "o3": ModelPrice.of("2", "8", "2", "0.50", tier=_LARGE),
    "o4-mini": ModelPrice.of("1.10", "4.40", "1.10", "0.275", tier=_MEDIUM),
    "o3-mini": ModelPrice.of("1.10", "4.40", "1.10", "0.55", tier=_MEDIUM),
    "o1": ModelPrice.of("15", "60", "15", "7.50", tier=_LARGE),
}
TIER_MODELS: dict[ModelTier, str] = {
    _LARGE: "gpt-4.1",
    _MEDIUM: "gpt-4.1-mini",
    _SMALL: "gpt-4.1-nano",
}
