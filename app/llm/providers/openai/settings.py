"""The OpenAI-compatible provider's settings group (`LOOPWRIGHT_LLM__OPENAI__…`), and where
an `openai` model is reached and with which key, read from it and the agent's model config
without loading the SDK (a slow import, paid only by a process whose agents call such a
server).

The settings' key belongs to the settings' base URL (OpenAI's API when unset): it is sent
there and nowhere else. An agent with a base URL of its own takes its key from the variable
its `api_key_env` names, or goes without one: a local server (Ollama, llama.cpp, LM Studio,
vLLM) needs none, and the SDK, which insists on a key, is given `PLACEHOLDER_KEY`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr

from app.core.model_config import ModelConfig

KEY_ENV = "LOOPWRIGHT_LLM__OPENAI__API_KEY"
BASE_URL_ENV = "LOOPWRIGHT_LLM__OPENAI__BASE_URL"
OPENAI_BASE_URL = "https://api.openai.com/v1"
PLACEHOLDER_KEY = "loopwright-no-key"  # what a server that checks no key receives


class OpenAISettings(BaseModel):
    """The `openai` provider: OpenAI's API or a server speaking its Chat Completions
    (`LOOPWRIGHT_LLM__OPENAI__API_KEY` and so on). The key goes to this base URL only."""

    api_key: SecretStr | None = Field(
        None, description="Key for `openai` models at the base URL below (OpenAI's API if unset)."
    )
    base_url: str | None = Field(
        None,
        description="Chat Completions base URL for every `openai` agent without one of its "
        "own (e.g. `http://localhost:11434/v1` for Ollama); unset: OpenAI's API.",
    )
    api_key_file: Path | None = Field(
        None,
        description="A file holding the key (a mounted secret); read again after a 401. Takes "
        "precedence over the key.",
    )


@dataclass(frozen=True)
class Endpoint:
    """A server and where its key comes from: the variable `key_env` (the agent's), the
    settings (`settings_key`), or nowhere (the placeholder)."""

    base_url: str
    key_env: str | None = None
    settings_key: bool = False


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def endpoint(settings: OpenAISettings, model: ModelConfig | None = None) -> Endpoint:
    """Where this model (None: an agent with nothing of its own) is reached, and with
    which key."""
    default = settings.base_url or OPENAI_BASE_URL
    base_url = (model.base_url if model is not None else None) or default
    key_env = model.api_key_env if model is not None else None
    if key_env is not None:
        return Endpoint(base_url, key_env=key_env)
    return Endpoint(base_url, settings_key=_same_url(base_url, default))


def has_settings_key(settings: OpenAISettings) -> bool:
    return settings.api_key is not None or settings.api_key_file is not None


def missing_credentials(settings: OpenAISettings, model: ModelConfig | None = None) -> str | None:
    """What is missing for a call, as the fix to make; None when nothing is. Only OpenAI's
    own API needs a key from us: any other server gets the placeholder when none is set."""
    where = endpoint(settings, model)
    if where.key_env is not None:
        if where.key_env not in os.environ:
            return (
                f"the model's api_key_env names {where.key_env}, which is not set in this "
                "process: set it where the workers run"
            )
        return None
    if where.settings_key and has_settings_key(settings):
        return None
    if _same_url(where.base_url, OPENAI_BASE_URL):
        return (
            f"no OpenAI API key is configured: set {KEY_ENV} (or {KEY_ENV}_FILE) where the "
            f"workers run, or point `openai` models at another server ({BASE_URL_ENV}, or "
            "an agent's model.base_url)"
        )
    return None
