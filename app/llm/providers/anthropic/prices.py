"""Anthropic's list prices (5-minute cache writes) and the model of each tier a
downgraded run moves to."""

from __future__ import annotations

from app.core.vocabulary import ModelTier
from app.llm.model_price import ModelPrice

_LARGE, _MEDIUM, _SMALL = ModelTier.LARGE, ModelTier.MEDIUM, ModelTier.SMALL

PRICES: dict[str, ModelPrice] = {
    "claude-opus-4-5": ModelPrice.of("5", "25", tier=_LARGE),
    "claude-opus-4-1": ModelPrice.of("15", "75", tier=_LARGE),
    "claude-opus-4": ModelPrice.of("15", "75", tier=_LARGE),
    "claude-sonnet-4-5": ModelPrice.of("3", "15", tier=_MEDIUM),
    "claude-sonnet-4": ModelPrice.of("3", "15", tier=_MEDIUM),
    "claude-3-7-sonnet": ModelPrice.of("3", "15", tier=_MEDIUM),
    "claude-haiku-4-5": ModelPrice.of("1", "5", tier=_SMALL),
    "claude-3-5-haiku": ModelPrice.of("0.80", "4", tier=_SMALL),
    "claude-3-haiku": ModelPrice.of("0.25", "1.25", "0.30", "0.03", tier=_SMALL),
}
TIER_MODELS: dict[ModelTier, str] = {
    _LARGE: "claude-opus-4-5",
    _MEDIUM: "claude-sonnet-4-5",
    _SMALL: "claude-haiku-4-5",
}
