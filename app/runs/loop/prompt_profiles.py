"""The system prompt follows the model's tier: a large model
gets the `full` profile, a medium one `standard`, a small one `basic`, and a model in no
tier the full one (the safe default). A profile decides how much of the agent's
personality is rendered and within how many tokens; the agent's own prompt (its authority
and identity) is never cut.

A personality over its profile's budget is trimmed in three steps, stopping at the first
that fits: drop the behaviour levels (`condensed`), shorten the description at a word
boundary, keep the communication style alone (`minimal`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from app.agents.schemas import Personality
from app.core.vocabulary import ModelTier
from app.llm.tokens import count_text

log = logging.getLogger(__name__)


class Detail(StrEnum):
    FULL = "full"  # description, style, traits and behaviour levels
    CONDENSED = "condensed"  # description, style and traits
    MINIMAL = "minimal"  # the communication style alone


@dataclass(frozen=True)
class PromptProfile:
    name: str
    detail: Detail
    max_personality_tokens: int


FULL = PromptProfile("full", Detail.FULL, 500)
STANDARD = PromptProfile("standard", Detail.CONDENSED, 200)
BASIC = PromptProfile("basic", Detail.MINIMAL, 80)
_BY_TIER = {ModelTier.LARGE: FULL, ModelTier.MEDIUM: STANDARD, ModelTier.SMALL: BASIC}


def profile_for(tier: ModelTier | None) -> PromptProfile:
    return FULL if tier is None else _BY_TIER[tier]


@dataclass(frozen=True)
class Trim:
    """What trimming did: 0 nothing, 1 dropped the levels, 2 shortened the description,
    3 kept the style alone."""

    before_tokens: int
    after_tokens: int
    max_tokens: int
    step: int


def render(personality: Personality, detail: Detail, description: str | None = None) -> str:
    lines = []
    text = personality.description if description is None else description
    if detail is not Detail.MINIMAL and text:
        lines.append(text)
    if personality.communication_style:
        lines.append(f"Communication style: {personality.communication_style}.")
    if detail is not Detail.MINIMAL and personality.traits:
        lines.append(f"Traits: {', '.join(personality.traits)}.")
    if detail is Detail.FULL:
        levels = [
            f"{name.replace('_', ' ')}: {level.value}"
            for name, level in (
                ("risk_tolerance", personality.risk_tolerance),
                ("creativity", personality.creativity),
                ("verbosity", personality.verbosity),
            )
            if level is not None
        ]
        if levels:
            lines.append(f"Behaviour: {'; '.join(levels)}.")
    return "\n".join(lines)


def personality_section(personality: Personality, profile: PromptProfile) -> tuple[str, Trim]:
    """The personality as the profile renders it, within its token budget."""
    budget = profile.max_personality_tokens
    text = render(personality, profile.detail)
    before = count_text(text)
    step = 0
    if before > budget and profile.detail is Detail.FULL:
        step, text = 1, render(personality, Detail.CONDENSED)
    if count_text(text) > budget and profile.detail is not Detail.MINIMAL:
        rest = count_text(text) - count_text(personality.description)
        step, text = (
            2,
            render(
                personality, Detail.CONDENSED, _shortened(personality.description, budget - rest)
            ),
        )
    if count_text(text) > budget:
        step, text = 3, render(personality, Detail.MINIMAL)
    trim = Trim(before, count_text(text), budget, step)
    if step:
        log.info(
            "prompt.personality.trimmed before=%d after=%d max=%d step=%d",
            trim.before_tokens,
            trim.after_tokens,
            trim.max_tokens,
            trim.step,
        )
    return text, trim


def _shortened(description: str, tokens: int) -> str:
    """The description cut at a word boundary to fit `tokens` (with its "..."): the most
    words that fit, found by bisection (a description may run to thousands of words)."""
    words = description.split()
    fits, over = 0, len(words) + 1
    while over - fits > 1:
        middle = (fits + over) // 2
        if count_text(" ".join(words[:middle]) + "...") <= tokens:
            fits = middle
        else:
            over = middle
    return " ".join(words[:fits]) + "..." if fits else ""
