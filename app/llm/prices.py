"""What an LLM call costs: a price per provider and model (USD per million tokens of
input, output, cache writes and cache reads), shipped by each provider's package for its
current models and overridden or extended in settings (`LOOPWRIGHT_COSTS__PRICES`).

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
from app.llm.model_price import ModelPrice
from app.llm.provider import Usage
from app.llm.providers import registry

_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$")  # -20250929, -2024-08-06, -latest
_NEXT_TIER = {ModelTier.LARGE: ModelTier.MEDIUM, ModelTier.MEDIUM: ModelTier.SMALL}


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
        self._prices = {**registry.shipped_prices(), **(overrides or {})}
        self._tier_models = {**registry.shipped_tier_models(), **(tier_models or {})}

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
