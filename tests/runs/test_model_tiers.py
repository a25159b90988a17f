"""Model tiers through the real service and a server speaking the Messages API: a run of
a large-tier model starts on the medium tier's model once a monthly budget it counts
against is past the threshold (recorded on the run), and the system prompt follows the
tier: the full personality for the large model, the standard profile's for the medium."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.runs.test_runs_api import settle, start
from tests.support.anthropic_wire import Reply, anthropic_wire
from tests.support.server import make_settings, running_server

# Output only: 1,000 tokens of the large model cost 0.01 USD, of the medium one 0.001.
PRICES = {
    "anthropic/wire-large": {"input": 0, "output": 10, "tier": "large"},
    "anthropic/wire-medium": {"input": 0, "output": 1, "tier": "medium"},
}
TIERS = {"anthropic": {"large": "wire-large", "medium": "wire-medium"}}
LONG_DESCRIPTION = " ".join(f"A patient analyst who checks figure {i} twice." for i in range(60))
AGENT: dict[str, Any] = {
    "name": "analyst",
    "system_prompt": "You answer questions about the quarterly figures.",
    "model": {"provider": "anthropic", "name": "wire-large", "max_output_tokens": 1_000},
    "personality": {
        "description": LONG_DESCRIPTION,
        "communication_style": "concise",
        "traits": ["thorough", "calm"],
        "risk_tolerance": "low",
        "creativity": "medium",
    },
}


async def test_past_the_threshold_a_large_model_s_run_moves_down_a_tier(
    database_url: str, clean_db: AsyncEngine
) -> None:
    async with anthropic_wire() as wire:
        wire.plan(*[Reply.text("Done.", output_tokens=1_000) for _ in range(2)])
        settings = make_settings(
            database_url,
            llm={"anthropic": {"api_key": "sk-test", "base_url": wire.url}},
            costs={"prices": PRICES, "tier_models": TIERS, "downgrade_at_percent": 80},
        )
        async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
            made = await http.post("/v1/agents", json=AGENT)
            assert made.status_code == 201, made.text
            agent = made.json()
            budget = await http.post(
                "/v1/budgets",
                json={
                    "scope": "agent",
                    "subject": agent["id"],
                    "period": "month",
                    "limit_usd": 0.0125,
                },
            )
            assert budget.status_code == 201, budget.text

            first = await settle(http, (await start(http, agent_id=agent["id"]))["id"])
            second = await settle(http, (await start(http, agent_id=agent["id"]))["id"])
            steps = (await http.get(f"/v1/runs/{second['id']}/history")).json()["items"]

    assert first["model_downgrade"] is None  # nothing was spent when it started
    assert first["usage"]["cost_usd"] == pytest.approx(0.01)  # 80 % of the budget now
    assert second["status"] == "completed"
    assert second["model_downgrade"] == {
        "from_model": "wire-large",
        "to_model": "wire-medium",
        "from_tier": "large",
        "to_tier": "medium",
        "budget_id": budget.json()["id"],
        "spent_percent": 80.0,
    }
    assert second["usage"]["cost_usd"] == pytest.approx(0.001)  # priced as the medium model
    assert any("agent.budget.downgraded" in step["events"] for step in steps)
    assert [call["model"] for step in steps if (call := step["call"])] == ["wire-medium"]

    large, medium = (request.body for request in wire.requests)
    assert large["model"] == "wire-large" and medium["model"] == "wire-medium"
    # The full profile: the whole personality (trimmed to 500 tokens: the levels go first).
    assert large["system"].startswith(AGENT["system_prompt"] + "\n\n## Personality\n")
    assert "Communication style: concise." in large["system"]
    assert "Traits: thorough, calm." in large["system"]
    # The standard profile: no behaviour levels, the description cut to fit 200 tokens.
    assert medium["system"].startswith(AGENT["system_prompt"])
    assert "Behaviour:" not in medium["system"]
    assert "..." in medium["system"] and len(medium["system"]) < len(large["system"])
