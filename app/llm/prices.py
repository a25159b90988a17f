"""What an LLM call costs: a price per provider and model (USD per million tokens of
input, output, cache writes and cache reads), shipped for current models and overridden
or extended in settings (`LOOPWRIGHT_COSTS__PRICES`).

A model without a price costs `None`, never a guess: a local model (any `openai` model a
server of one's own serves), a new one, or a scripted one until a price is set for it.
Dated snapshots take their family's price (`claude-sonnet-4-5-20250929` is priced as
`claude-sonnet-4-5`, `gpt-4o-2024-08-06` as `gpt-4o`) unless they have one of their own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from app.core.config import CostSettings
from app.core.vocabulary import ModelTier
from app.llm.provider import Usage

_PER_TOKEN = Decimal(1_000_000)
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$")  # -20250929, -2024-08-06, -latest


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens, and the model's tier (None: not in one)."""

    input: Decimal
    output: Decimal
    cache_write: Decimal
    cache_read: Decimal
    tier: ModelTier | None = None

    @classmethod
    def of(
        cls,
        input: str,
        output: str,
        cache_write: str | None = None,
        cache_read: str | None = None,
        *,
        tier: ModelTier | None = None,
    ) -> ModelPrice:
        """Anthropic's rule when the cache prices are not given: a cache write costs
        1.25 times the input, a cache read a tenth of it."""
        per_input = Decimal(input)
        return cls(
            per_input,
            Decimal(output),
            Decimal(cache_write) if cache_write is not None else per_input * Decimal("1.25"),
            Decimal(cache_read) if cache_read is not None else per_input / 10,
            tier,
        )

    def cost(self, usage: Usage) -> Decimal:
        tokens = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_write_tokens * self.cache_write
            + usage.cache_read_tokens * self.cache_read
        )
        return tokens / _PER_TOKEN

    def worst_case(self, input_tokens: int, max_output_tokens: int) -> Decimal:
        """The most a call can cost: every input token at the dearest input price (a cache
        write, usually), and all the output it may write."""
        dearest = max(self.input, self.cache_write, self.cache_read)
        return (input_tokens * dearest + max_output_tokens * self.output) / _PER_TOKEN


_LARGE, _MEDIUM, _SMALL = ModelTier.LARGE, ModelTier.MEDIUM, ModelTier.SMALL

# Anthropic's list prices (5-minute cache writes), keyed `provider/model`.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "anthropic/claude-opus-4-5": ModelPrice.of("5", "25", tier=_LARGE),
    "anthropic/claude-opus-4-1": ModelPrice.of("15", "75", tier=_LARGE),
    "anthropic/claude-opus-4": ModelPrice.of("15", "75", tier=_LARGE),
    "anthropic/claude-sonnet-4-5": ModelPrice.of("3", "15", tier=_MEDIUM),
    "anthropic/claude-sonnet-4": ModelPrice.of("3", "15", tier=_MEDIUM),
    "anthropic/claude-3-7-sonnet": ModelPrice.of("3", "15", tier=_MEDIUM),
    "anthropic/claude-haiku-4-5": ModelPrice.of("1", "5", tier=_SMALL),
    "anthropic/claude-3-5-haiku": ModelPrice.of("0.80", "4", tier=_SMALL),
    "anthropic/claude-3-haiku": ModelPrice.of("0.25", "1.25", "0.30", "0.03", tier=_SMALL),
    # OpenAI's list prices (standard tier, as of 2025-08): input, output, cache writes (not
    # charged apart: the input's price), cached input.
    "openai/gpt-4.1": ModelPrice.of("2", "8", "2", "0.50", tier=_LARGE),
    "openai/gpt-4.1-mini": ModelPrice.of("0.40", "1.60", "0.40", "0.10", tier=_MEDIUM),
    "openai/gpt-4.1-nano": ModelPrice.of("0.10", "0.40", "0.10", "0.025", tier=_SMALL),
    "openai/gpt-4o": ModelPrice.of("2.50", "10", "2.50", "1.25", tier=_LARGE),
    "openai/gpt-4o-2024-05-13": ModelPrice.of("5", "15", "5", "5", tier=_LARGE),
    "openai/gpt-4o-mini": ModelPrice.of("0.15", "0.60", "0.15", "0.075", tier=_SMALL),
    "openai/o3": ModelPrice.of("2", "8", "2", "0.50", tier=_LARGE),
    "openai/o4-mini": ModelPrice.of("1.10", "4.40", "1.10", "0.275", tier=_MEDIUM),
    "openai/o3-mini": ModelPrice.of("1.10", "4.40", "1.10", "0.55", tier=_MEDIUM),
    "openai/o1": ModelPrice.of("15", "60", "15", "7.50", tier=_LARGE),
}
# The model a run moves to when it is downgraded to a tier, per provider.
DEFAULT_TIER_MODELS: dict[str, dict[ModelTier, str]] = {
    "anthropic": {
        _LARGE: "claude-opus-4-5",
        _MEDIUM: "claude-sonnet-4-5",
        _SMALL: "claude-haiku-4-5",
    },
    "openai": {_LARGE: "gpt-4.1", _MEDIUM: "gpt-4.1-mini", _SMALL: "gpt-4.1-nano"},
}
_NEXT_TIER = {_LARGE: _MEDIUM, _MEDIUM: _SMALL}


@dataclass(frozen=True)
class Downgrade:
    """A large model's run moved to the next tier's model."""

    from_model: str
    to_model: str
    from_tier: ModelTier
    to_tier: ModelTier


class PriceTable:
    def __init__(
        self,
        overrides: Mapping[str, ModelPrice] | None = None,
        tier_models: Mapping[str, Mapping[ModelTier, str]] | None = None,
    ) -> None:
        self._prices = {**DEFAULT_PRICES, **(overrides or {})}
        self._tier_models = {**DEFAULT_TIER_MODELS, **(tier_models or {})}

    @classmethod
    def from_settings(cls, settings: CostSettings) -> PriceTable:
        return cls(
            {
                key: ModelPrice.of(
                    str(price.input),
                    str(price.output),
                    None if price.cache_write is None else str(price.cache_write),
                    None if price.cache_read is None else str(price.cache_read),
                    tier=price.tier,
                )
                for key, price in settings.prices.items()
            },
            settings.tier_models,
        )

    def price(self, provider: str, model: str) -> ModelPrice | None:
        found = self._prices.get(f"{provider}/{model}")
        if found is None and _SNAPSHOT.search(model):
            found = self._prices.get(f"{provider}/{_SNAPSHOT.sub('', model)}")
        return found

    def tier(self, provider: str, model: str) -> ModelTier | None:
        price = self.price(provider, model)
        return None if price is None else price.tier

    def downgrade(self, provider: str, model: str) -> Downgrade | None:
        """Where a run of a large model goes under budget pressure: the medium tier's model
        of its provider; None for any other model, or a provider without one."""
        tier = self.tier(provider, model)
        if tier is not ModelTier.LARGE:
            return None
        lower = _NEXT_TIER[tier]
        target = self._tier_models.get(provider, {}).get(lower)
        return None if target is None else Downgrade(model, target, tier, lower)

    def cost(self, provider: str, model: str, usage: Usage) -> Decimal | None:
        """The call's cost in USD; None when the model has no price."""
        price = self.price(provider, model)
        return None if price is None else price.cost(usage)
