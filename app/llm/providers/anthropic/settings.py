"""The Anthropic provider's settings group (`LOOPWRIGHT_LLM__ANTHROPIC__…`) and what a
call lacks in it, read without loading its SDK (a slow import, paid only by a process
whose agents call the API)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr

KEY_ENV = "LOOPWRIGHT_LLM__ANTHROPIC__API_KEY"


class AnthropicSettings(BaseModel):
    """The `anthropic` provider (`LOOPWRIGHT_LLM__ANTHROPIC__API_KEY` and so on)."""

    api_key: SecretStr | None = Field(None, description="Key for `anthropic` models.")
    base_url: str | None = Field(None, description="Messages API base URL override.")
    api_key_file: Path | None = Field(
        None,
        description="A file holding the key (a mounted secret); read again after a 401, so "
        "a rotated key is picked up without a restart. Takes precedence over the key.",
    )


def missing_credentials(settings: AnthropicSettings) -> str | None:
    """What is missing for a call, as the fix to make; None when a key is configured."""
    if settings.api_key is None and settings.api_key_file is None:
        return (
            f"no Anthropic API key is configured: set {KEY_ENV} (or {KEY_ENV}_FILE) "
            "where the workers run"
        )
    return None
