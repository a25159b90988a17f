"""The provider registry: a provider's name picks the factory of its pool; an unknown
name, or a provider without its credentials, is ProviderUnavailable naming what is
missing; each provider reads its own settings group (`LOOPWRIGHT_LLM__<PROVIDER>__...`)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from app.core.config import LLMSettings, Settings
from app.core.messages import Message, TextBlock
from app.core.model_config import ModelConfig, ScriptedTurn
from app.core.vocabulary import ModelTier
from app.llm.model_price import ModelPrice
from app.llm.provider import (
    LLMRequest,
    LLMResponse,
    ModelOwner,
    Provider,
    ProviderPool,
    ProviderUnavailable,
    TextSink,
    Usage,
    UsageSink,
)
from app.llm.providers.anthropic.settings import AnthropicSettings
from app.llm.providers.anthropic.wire import AnthropicProvider
from app.llm.providers.kind import ProviderKind
from app.llm.providers.openai.settings import OpenAISettings
from app.llm.providers.registry import (
    KINDS,
    Providers,
    missing_credentials,
    provider_warnings,
    settings_of,
)
from app.llm.providers.scripted.provider import ScriptedProvider


@dataclass(frozen=True)
class Owner:
    model: ModelConfig
    id: str = "agent_1"
    version: int = 1


def anthropic_owner(**fields: Any) -> Owner:
    return Owner(ModelConfig(provider="anthropic", name="claude-test", **fields))


def scripted_owner() -> Owner:
    return Owner(ModelConfig(provider="scripted", name="s", script=[ScriptedTurn(text="hi")]))


def test_a_provider_name_without_a_factory_is_unavailable_and_named() -> None:
    # The schema only admits known names; a registry without one behaves the same.
    owner = Owner(ModelConfig.model_construct(provider="nowhere", name="m"))
    with pytest.raises(ProviderUnavailable, match="'nowhere'"):
        Providers(LLMSettings())(owner, "run_1")
    without_anthropic = {k: v for k, v in KINDS.items() if k != "anthropic"}
    with pytest.raises(ProviderUnavailable, match="'anthropic'"):
        Providers(LLMSettings(), without_anthropic)(anthropic_owner(), "run_1")


def test_an_anthropic_model_without_a_key_names_the_variable_to_set() -> None:
    with pytest.raises(ProviderUnavailable, match="LOOPWRIGHT_LLM__ANTHROPIC__API_KEY"):
        Providers(LLMSettings())(anthropic_owner(), "run_1")


def test_an_unreadable_key_file_names_its_variable(tmp_path: Path) -> None:
    settings = LLMSettings(anthropic=AnthropicSettings(api_key_file=tmp_path / "missing.key"))
    with pytest.raises(ProviderUnavailable, match="LOOPWRIGHT_LLM__ANTHROPIC__API_KEY_FILE"):
        Providers(settings)(anthropic_owner(), "run_1")


async def test_a_scripted_model_needs_no_settings_and_gets_a_provider_per_run() -> None:
    providers = Providers(LLMSettings())
    owner = scripted_owner()
    first = providers(owner, "run_1")
    assert isinstance(first, ScriptedProvider)
    assert providers(owner, "run_1") is first  # it keeps the faults it raised
    assert providers(owner, "run_2") is not first
    await providers.aclose()


async def test_anthropic_providers_are_shared_per_base_url() -> None:
    settings = LLMSettings(anthropic=AnthropicSettings(api_key="sk-test", base_url="http://a"))
    providers = Providers(settings)
    try:
        shared = providers(anthropic_owner(), "run_1")
        assert isinstance(shared, AnthropicProvider)
        assert providers(anthropic_owner(), "run_2") is shared
        own = providers(anthropic_owner(base_url="http://b"), "run_1")
        assert own is not shared
    finally:
        await providers.aclose()


class Echo:
    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        text = request.messages[-1].content[0]
        assert isinstance(text, TextBlock)
        return LLMResponse([text], "end_turn", Usage(), request.model)


class EchoPool:
    """A provider's pool as a new package would write it."""

    def __init__(self) -> None:
        self.closed = False
        MADE.append(self)

    def __call__(self, owner: ModelOwner, run_id: str) -> Provider:
        return Echo()

    async def aclose(self) -> None:
        self.closed = True


MADE: list[EchoPool] = []


class EchoSettings(BaseModel):
    pass


class EchoKind:
    name = "echo"
    settings = EchoSettings
    sdk_module = None
    own_models_only = False
    prices: dict[str, ModelPrice] = {}
    tier_models: dict[ModelTier, str] = {}

    def pool(self, settings: EchoSettings) -> ProviderPool:
        return EchoPool()

    def missing_credentials(self, settings: EchoSettings, model: ModelConfig | None) -> None:
        return None


async def test_a_new_provider_is_one_registry_entry() -> None:
    MADE.clear()
    kinds: dict[str, ProviderKind[Any]] = {**KINDS, "echo": EchoKind()}
    providers = Providers(LLMSettings(), kinds)
    owner = Owner(ModelConfig.model_construct(provider="echo", name="e"))
    assert MADE == []  # a pool is made on first use
    provider = providers(owner, "run_1")
    providers(owner, "run_2")
    [pool] = MADE
    request = LLMRequest(model="e", system="", messages=[Message.user_text("ping")], max_tokens=9)
    assert (await provider.complete(request)).content == [TextBlock(text="ping")]
    await providers.aclose()
    assert pool.closed


def test_each_provider_reads_its_own_settings_group(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LOOPWRIGHT_LLM__ANTHROPIC__API_KEY", "sk-from-env")
    monkeypatch.setenv("LOOPWRIGHT_LLM__ANTHROPIC__BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("LOOPWRIGHT_LLM__ANTHROPIC__API_KEY_FILE", str(tmp_path / "k"))
    anthropic = settings_of(Settings().llm, KINDS["anthropic"])
    assert isinstance(anthropic, AnthropicSettings)
    assert anthropic.api_key is not None
    assert anthropic.api_key.get_secret_value() == "sk-from-env"
    assert anthropic.base_url == "http://127.0.0.1:9"
    assert anthropic.api_key_file == tmp_path / "k"


def test_a_setting_in_the_old_flat_layout_is_refused_not_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOOPWRIGHT_LLM__ANTHROPIC_API_KEY", "sk-old-name")
    with pytest.raises(ValueError, match="anthropic_api_key"):
        Providers(Settings().llm)  # as the process builds its providers, at start-up


def test_a_bad_value_in_a_providers_group_is_refused_at_start_up() -> None:
    settings = LLMSettings.model_validate({"anthropic": {"api_key_file": ["not", "a", "path"]}})
    with pytest.raises(ValidationError, match="api_key_file"):
        Providers(settings)


async def test_a_scripted_turn_streams_its_text_at_its_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`stream_interval_ms` spaces the chunks of a text turn (the dashboard's live text is
    tested with it); the text comes back whole."""
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    monkeypatch.setattr("app.llm.providers.scripted.provider.asyncio.sleep", sleep)
    turn = ScriptedTurn(text="x" * 40, latency_ms=200, stream_interval_ms=50)
    chunks: list[str] = []

    async def on_text(delta: str) -> None:
        chunks.append(delta)

    request = LLMRequest(
        model="s", system="", messages=[Message.user_text("go")], max_tokens=10, tools=[], turn=0
    )
    response = await ScriptedProvider([turn]).complete(request, on_text)
    assert chunks == ["x" * 16, "x" * 16, "x" * 8]
    assert pauses == [0.2, 0.05, 0.05]  # the latency, then one pause between chunks
    assert response.content == [TextBlock(text="x" * 40)]


def openai_owner(**fields: Any) -> Owner:
    return Owner(ModelConfig(provider="openai", name="llama3.1:8b", **fields))


def test_an_openai_model_needs_a_key_only_for_openais_own_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Any other server gets a placeholder key when none is set; an agent's key variable
    must be set where the workers run."""
    monkeypatch.delenv("LOCAL_VENDOR_API_KEY", raising=False)
    settings = LLMSettings()
    [missing] = provider_warnings(settings, openai_owner())
    assert "LOOPWRIGHT_LLM__OPENAI__API_KEY" in missing
    assert provider_warnings(settings, openai_owner(base_url="http://localhost:11434/v1")) == []
    local = LLMSettings(openai=OpenAISettings(base_url="http://localhost:8000/v1"))
    assert provider_warnings(local, openai_owner()) == []
    assert "openai" not in missing_credentials(local)
    keyed = openai_owner(
        base_url="https://api.groq.com/openai/v1", api_key_env="LOCAL_VENDOR_API_KEY"
    )
    [unset] = provider_warnings(settings, keyed)
    assert "LOCAL_VENDOR_API_KEY" in unset
    monkeypatch.setenv("LOCAL_VENDOR_API_KEY", "sk-set")
    assert provider_warnings(settings, keyed) == []


def test_the_fallback_models_credentials_are_checked_too() -> None:
    settings = LLMSettings(anthropic=AnthropicSettings(api_key="sk-ant"))
    to_openai = anthropic_owner(fallback={"provider": "openai", "name": "gpt-4.1-mini"})
    [warning] = provider_warnings(settings, to_openai)
    assert warning.startswith("its fallback model: no OpenAI API key")
    to_local = anthropic_owner(
        fallback={"provider": "openai", "name": "llama3.1:8b", "base_url": "http://h:11434/v1"}
    )
    assert provider_warnings(settings, to_local) == []
    # One missing key is said once, for the model and its fallback alike.
    assert len(provider_warnings(LLMSettings(), anthropic_owner(fallback_name="claude-b"))) == 1


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ({"fallback_name": "b"}, None),
        (
            {"fallback_name": "b", "base_url": "http://p/v1", "api_key_env": "P_API_KEY"},
            ("openai", "b", "http://p/v1", "P_API_KEY"),
        ),
        (
            {
                "base_url": "http://p/v1",
                "api_key_env": "P_API_KEY",
                "fallback": {"provider": "openai", "name": "c"},
            },
            ("openai", "c", "http://p/v1", "P_API_KEY"),  # reached as the agent's model is
        ),
        (
            {
                "base_url": "http://p/v1",
                "api_key_env": "P_API_KEY",
                "fallback": {"provider": "openai", "name": "c", "base_url": "http://q/v1"},
            },
            ("openai", "c", "http://q/v1", None),  # a server of its own: not the agent's key
        ),
        (
            {
                "base_url": "http://p/v1",
                "fallback": {"provider": "anthropic", "name": "claude-haiku-4-5"},
                "fallback_name": "ignored",
            },
            ("anthropic", "claude-haiku-4-5", None, None),  # `fallback` wins
        ),
    ],
    ids=["name-only", "name-same-server", "same-server", "own-server", "other-provider"],
)
def test_a_fallback_model_is_reached_as_its_config_says(
    model: dict[str, Any], expected: tuple[str, str, str | None, str | None] | None
) -> None:
    config = ModelConfig(provider="openai", name="a", **model)
    fallback = config.fallback_model()
    if expected is None:
        assert fallback is not None and (fallback.provider, fallback.name) == ("openai", "b")
        assert (fallback.base_url, fallback.api_key_env) == (None, None)
        return
    assert fallback is not None
    assert (fallback.provider, fallback.name, fallback.base_url, fallback.api_key_env) == expected
    assert fallback.fallback_model() is None
    assert ModelConfig(provider="openai", name="a").fallback_model() is None


LOADED_ON = """
import asyncio, sys, threading
from app.llm.providers.registry import load_sdks

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "openai":
            print(threading.current_thread() is threading.main_thread())
        return None

sys.meta_path.insert(0, Watch())
asyncio.run(load_sdks("openai", "scripted"))
print("app.llm.providers.openai.wire" in sys.modules)
"""


def test_a_runs_provider_sdk_is_imported_off_the_event_loop() -> None:
    """A run whose provider's SDK is not loaded yet imports it on a thread: on the event
    loop, its import would stall every other run of the process."""
    found = subprocess.run(
        [sys.executable, "-c", LOADED_ON], capture_output=True, text=True, check=True
    )
    assert found.stdout.split() == ["False", "True"], found.stderr


SCRIPTED_ALONE = """
import sys
import app.llm.providers.scripted
print(sorted(m for m in sys.modules if m.split(".")[-1] in ("anthropic", "openai")))
"""


def test_the_scripted_double_depends_on_no_vendor() -> None:
    """The tests' double answers in a fault dialect of its own: importing it loads no
    vendor's provider package, nor its SDK."""
    found = subprocess.run(
        [sys.executable, "-c", SCRIPTED_ALONE], capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]", found.stdout + found.stderr
