"""What one model's tokens cost (USD per million of input, output, cache writes and cache
reads) and its tier: what a provider package ships for its models (`prices.py` in each)
and settings add to (`LOOPWRIGHT_COSTS__PRICES`)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from app.core.vocabulary import ModelTier
from app.llm.provider import Usage

_PER_TOKEN = Decimal(1_000_000)


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
