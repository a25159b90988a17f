"""plan_execute's models through the real service and a server speaking the Messages API:
the planner's call goes to `planner_model` with `submit_plan` as its only tool, forced; the
steps' calls go to `executor_model` with the agent's tools and `step_failed`. A run a budget
moved down a tier makes every call, the planner's too, on the cheaper model."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.runs.test_model_tiers import PRICES, TIERS
from tests.runs.test_runs_api import settle, start
from tests.support.anthropic_wire import Reply, ToolUse, anthropic_wire
from tests.support.server import make_settings, running_server

PLAN = {"steps": [{"goal": "answer", "acceptance_criteria": ["it is answered"]}]}
AGENT: dict[str, Any] = {
    "name": "planner",
    "tools": ["echo"],
    "execution_loop": "plan_execute",
    "plan_execute": {"planner_model": "wire-large", "executor_model": "wire-medium"},
    "model": {"provider": "anthropic", "name": "wire-large", "max_output_tokens": 1_000},
}


def names(request: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in request.get("tools", [])]


async def test_the_planner_and_the_executor_are_called_as_configured(
    database_url: str, clean_db: AsyncEngine
) -> None:
    async with anthropic_wire() as wire:
        wire.plan(
            # the planner: 1,000 tokens of the large model are 80 % of the budget below
            Reply.tools(ToolUse("submit_plan", PLAN), output_tokens=1_000),
            Reply.text("42"),
            Reply.tools(ToolUse("submit_plan", PLAN, id="toolu_wire_02")),
            Reply.text("43"),
        )
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

    assert first["status"] == "completed" and first["result"] == "42", first
    assert first["usage"]["cost_usd"] == pytest.approx(0.01, rel=0.01)
    planner, executor, *downgraded = (request.body for request in wire.requests)
    assert planner["model"] == "wire-large"
    assert names(planner) == ["submit_plan"]
    assert planner["tool_choice"] == {"type": "tool", "name": "submit_plan"}
    assert executor["model"] == "wire-medium"
    assert names(executor)[0] == "echo" and names(executor)[-1] == "step_failed"
    assert "submit_plan" not in names(executor)
    assert executor.get("tool_choice") in (None, {"type": "auto"})

    assert second["status"] == "completed" and second["result"] == "43", second
    assert second["model_downgrade"]["to_model"] == "wire-medium"
    assert [r["model"] for r in downgraded] == ["wire-medium", "wire-medium"]
