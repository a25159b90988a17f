"""The price table's arithmetic: USD per million tokens of each kind, dated snapshots
priced as their family, overrides from settings, and no price for an unknown model."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.core.config import CostSettings
from app.core.vocabulary import ModelTier
from app.llm.model_price import ModelPrice
from app.llm.prices import PriceTable
from app.llm.provider import Usage


def test_each_kind_of_token_has_its_price() -> None:
    sonnet = PriceTable().price("anthropic", "claude-sonnet-4-5")
    medium = ModelTier.MEDIUM
    assert sonnet == ModelPrice(Decimal(3), Decimal(15), Decimal("3.75"), Decimal("0.3"), medium)
    usage = Usage(
        input_tokens=2_000, output_tokens=1_000, cache_write_tokens=4_000, cache_read_tokens=10_000
    )
    # 2,000 x 3 + 1,000 x 15 + 4,000 x 3.75 + 10,000 x 0.30 = 39,000 per million
    assert PriceTable().cost("anthropic", "claude-sonnet-4-5", usage) == Decimal("0.039")


def test_a_snapshot_takes_its_family_s_price_unless_it_has_its_own() -> None:
    table = PriceTable({"anthropic/claude-haiku-4-5-20251001": ModelPrice.of("2", "6")})
    one_million_in = Usage(input_tokens=1_000_000)
    assert table.cost("anthropic", "claude-sonnet-4-5-20250929", one_million_in) == 3
    assert table.cost("anthropic", "claude-3-5-haiku-latest", one_million_in) == Decimal("0.8")
    assert table.cost("anthropic", "claude-haiku-4-5-20251001", one_million_in) == 2
    assert table.cost("anthropic", "claude-haiku-4-5", one_million_in) == 1


def test_openai_models_are_priced_under_openai_with_their_cached_input() -> None:
    table = PriceTable()
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=1_000_000)
    assert table.cost("openai", "gpt-4o", usage) == Decimal("13.75")  # 2.50 + 10 + 1.25
    assert table.cost("openai", "gpt-4.1-mini", usage) == Decimal("2.10")  # 0.40 + 1.60 + 0.10
    # OpenAI's dated snapshots, `-YYYY-MM-DD`, as their family; an older dearer one as itself.
    assert table.cost("openai", "gpt-4o-2024-08-06", usage) == Decimal("13.75")
    assert table.cost("openai", "gpt-4o-2024-05-13", usage) == Decimal("25")
    assert table.cost("anthropic", "gpt-4o", usage) is None
    assert table.cost("openai", "llama3.1:8b", usage) is None  # a local server's model
    assert table.tier("openai", "gpt-4.1") is ModelTier.LARGE
    downgrade = table.downgrade("openai", "gpt-4o")
    assert downgrade is not None and downgrade.to_model == "gpt-4.1-mini"
    assert table.downgrade("openai", "gpt-4.1-mini") is None


def test_a_model_without_a_price_costs_none_not_zero() -> None:
    table = PriceTable()
    assert table.cost("scripted", "s", Usage(input_tokens=10)) is None
    assert table.cost("anthropic", "claude-unreleased-9", Usage(input_tokens=10)) is None
    assert table.cost("other", "claude-sonnet-4-5", Usage(input_tokens=10)) is None


def test_settings_add_and_replace_prices() -> None:
    settings = CostSettings.model_validate(
        {
            "prices": {
                "scripted/s": {"input": 1, "output": 2},
                "anthropic/claude-sonnet-4-5": {"input": 2, "output": 10, "cache_read": 0},
            }
        }
    )
    table = PriceTable.from_settings(settings)
    assert table.price("scripted", "s") == ModelPrice.of("1", "2")
    sonnet = table.price("anthropic", "claude-sonnet-4-5")
    assert sonnet == ModelPrice(Decimal(2), Decimal(10), Decimal("2.5"), Decimal(0))  # no tier

    tiered = CostSettings.model_validate(
        {
            "prices": {"local/big": {"input": 1, "output": 1, "tier": "large"}},
            "tier_models": {"local": {"medium": "small-but-fine"}},
        }
    )
    downgrade = PriceTable.from_settings(tiered).downgrade("local", "big")
    assert downgrade is not None and downgrade.to_model == "small-but-fine"
    assert PriceTable().downgrade("anthropic", "claude-opus-4-1-20250805") is not None
    assert PriceTable().downgrade("anthropic", "claude-sonnet-4-5") is None  # not large
    assert PriceTable().downgrade("scripted", "s") is None  # no price, no tier


@pytest.mark.parametrize("key", ["sonnet", "/s", "scripted/", ""])
def test_a_price_key_names_provider_and_model(key: str) -> None:
    with pytest.raises(ValueError, match="provider/model"):
        CostSettings.model_validate({"prices": {key: {"input": 1, "output": 1}}})


def test_a_price_is_never_negative() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        CostSettings.model_validate({"prices": {"a/b": {"input": -1, "output": 1}}})
