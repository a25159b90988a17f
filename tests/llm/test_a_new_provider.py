"""A model provider is one package and one registry entry: `lan` (tests/llm/lan/), written
outside `app/`, is registered, read from its own settings group, and serves a real run
against a local server speaking its wire format; its agents are checked for its
credentials, its calls priced from its own list, its large model downgraded to its own
medium one. Unregistered, agents may not name it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import LLMSettings, Settings
from app.core.model_config import ModelConfig
from app.llm.prices import PriceTable
from app.llm.providers import registry
from tests.llm.lan import BASE_URL_ENV, PROVIDER, LanSettings
from tests.support.chat_completions_wire import Reply, chat_completions_wire
from tests.support.factories import settle, start_run
from tests.support.server import make_settings, running_server


@pytest.fixture
def lan() -> Iterator[None]:
    registry.register(PROVIDER)
    yield
    registry.unregister(PROVIDER.name)


@dataclass(frozen=True)
class Owner:
    model: ModelConfig
    id: str = "agent_1"
    version: int = 1


async def test_a_run_is_served_by_a_provider_defined_outside_the_app(
    lan: None, database_url: str, clean_db: AsyncEngine
) -> None:
    async with chat_completions_wire() as wire:
        wire.plan(Reply("Hello from the LAN.", prompt_tokens=1_000, completion_tokens=500))
        settings = make_settings(
            database_url, llm={"lan": {"base_url": wire.base_url, "api_key": "sk-lan"}}
        )
        async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
            body = {"name": "on-lan", "system_prompt": "Be brief.", "tools": []}
            model = {"provider": "lan", "name": "lan-large"}
            created = await http.post("/v1/agents", json={**body, "model": model})
            assert created.status_code == 201, created.text
            assert created.json()["warnings"] == []
            assert created.json()["model"]["provider"] == "lan"
            run = await start_run(http, created.json()["id"], input="Hi?")
            final = await settle(http, run["id"])
            steps = (await http.get(f"/v1/runs/{run['id']}/history")).json()["items"]

    assert final["status"] == "completed", final
    assert final["result"] == "Hello from the LAN."
    # Priced from the package's own list: 1 000 in at $2, 500 out at $6 per million.
    assert final["usage"]["cost_usd"] == pytest.approx(0.005)
    calls = [step["call"] for step in steps if step["call"] is not None]
    assert [(c["provider"], c["model"]) for c in calls] == [("lan", "lan-large")]
    [request] = wire.requests
    assert request.headers["authorization"] == "Bearer sk-lan"
    assert request.body["model"] == "lan-large"
    assert request.body["messages"][-1] == {"role": "user", "content": "Hi?"}


def test_its_settings_credentials_and_tiers_are_its_own(
    lan: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BASE_URL_ENV, "http://lan.example:8000/v1")
    group = registry.settings_of(Settings().llm, PROVIDER)
    assert group == LanSettings(base_url="http://lan.example:8000/v1")
    with pytest.raises(ValidationError, match="nope"):
        registry.Providers(LLMSettings.model_validate({"lan": {"nope": 1}}))

    owner = Owner(ModelConfig(provider="lan", name="lan-large"))
    [warning] = registry.provider_warnings(LLMSettings(), owner)
    assert BASE_URL_ENV in warning
    assert "lan" in registry.missing_credentials(LLMSettings())
    assert registry.own_models_only("lan")

    downgrade = PriceTable().downgrade("lan", "lan-large")
    assert downgrade is not None and downgrade.to_model == "lan-medium"


def test_an_unregistered_provider_cannot_be_named() -> None:
    with pytest.raises(ValidationError, match="'anthropic', 'openai' or 'scripted'"):
        ModelConfig(provider="lan", name="lan-large")
    with pytest.raises(ValueError, match="LOOPWRIGHT_LLM__LAN"):
        registry.Providers(LLMSettings.model_validate({"lan": {"base_url": "http://h"}}))
