"""Prompt profiles: each tier's profile, and the personality trimmed step by step to the
profile's token budget (seed 002, "Prompt Profiles")."""

from __future__ import annotations

from app.agents.schemas import Personality
from app.core.vocabulary import ModelTier
from app.llm.tokens import count_text
from app.runs.loop.prompt_profiles import (
    BASIC,
    FULL,
    STANDARD,
    Detail,
    PromptProfile,
    personality_section,
    profile_for,
    render,
)

SHORT = Personality(
    description="A careful analyst.",
    communication_style="concise",
    traits=["thorough"],
    risk_tolerance="low",
    verbosity="high",
)


def _described(words: int) -> Personality:
    return SHORT.model_copy(update={"description": " ".join(["figures"] * words)})


def test_each_tier_has_its_profile_and_no_tier_the_full_one() -> None:
    assert profile_for(ModelTier.LARGE) is FULL and profile_for(None) is FULL
    assert profile_for(ModelTier.MEDIUM) is STANDARD and profile_for(ModelTier.SMALL) is BASIC


def test_a_personality_that_fits_is_rendered_as_the_profile_says() -> None:
    full, trim = personality_section(SHORT, FULL)
    assert full == (
        "A careful analyst.\nCommunication style: concise.\nTraits: thorough.\n"
        "Behaviour: risk tolerance: low; verbosity: high."
    )
    assert trim.step == 0 and trim.after_tokens == trim.before_tokens <= 500
    standard, _ = personality_section(SHORT, STANDARD)
    assert standard == "A careful analyst.\nCommunication style: concise.\nTraits: thorough."
    assert personality_section(SHORT, BASIC)[0] == "Communication style: concise."


def test_trimming_drops_the_levels_first() -> None:
    near = _described(490)  # 500 tokens only without its behaviour line
    assert count_text(render(near, Detail.CONDENSED)) <= 500 < count_text(render(near, Detail.FULL))
    text, trim = personality_section(near, FULL)
    assert trim.step == 1 and "Behaviour" not in text and trim.after_tokens <= 500


def test_then_shortens_the_description_at_a_word_boundary() -> None:
    text, trim = personality_section(_described(2_000), STANDARD)
    assert trim.step == 2 and trim.before_tokens > 200 >= trim.after_tokens
    assert text.startswith("figures figures") and "figures..." in text
    assert text.endswith("Traits: thorough.")


def test_and_keeps_the_style_alone_when_nothing_else_fits() -> None:
    # Its traits alone are over the budget: no cut of the description can make it fit.
    crowded = SHORT.model_copy(update={"traits": [f"meticulous-{i}" for i in range(20)]})
    text, trim = personality_section(crowded, PromptProfile("tight", Detail.CONDENSED, 30))
    assert trim.step == 3 and text == "Communication style: concise."
