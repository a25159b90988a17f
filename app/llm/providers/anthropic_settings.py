"""What the Anthropic provider needs from its settings group, read without loading its
SDK (a slow import, paid only by a process whose agents call the API)."""

from __future__ import annotations

from app.core.config import AnthropicSettings

KEY_ENV = "LOOPWRIGHT_LLM__ANTHROPIC__API_KEY"


def missing_credentials(settings: AnthropicSettings) -> str | None:
    """What is missing for a call, as the fix to make; None when a key is configured."""
    if settings.api_key is None and settings.api_key_file is None:
        return (
            f"no Anthropic API key is configured: set {KEY_ENV} (or {KEY_ENV}_FILE) "
            "where the workers run"
        )
    return None
