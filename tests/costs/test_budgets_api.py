"""Budgets through the real service: a call starts only if its worst case fits (the run's
own limit, its task's, its agent's and its project's, a day or a month), racing runs make
exactly the calls a budget has room for, a run out of budget fails without a retry and its
task stays where it is, alerts fire once per threshold and period; and the `/v1/budgets`
resource itself (create, list with standings, change, delete, its refusals)."""

from __future__ import annotations

import asyncio
from datetime import date
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from app.core.config import Settings
from app.costs.store import budgets as budget_store
from app.costs.store import costs as cost_store
from app.costs.store.costs import CallCost
from tests.runs.test_runs_api import make_agent, settle, start
from tests.support.api import assert_problem, first_task_run
from tests.support.cli import cli
from tests.support.factories import create_task
from tests.support.server import make_settings, running_server
from tests.support.sse import SseReader

pytestmark = pytest.mark.own_server  # settings of its own (`settings` below)

# Output only, 10 USD a million tokens: a call that writes its whole `max_output_tokens`
# (1,000) costs 0.01 USD, which is also its worst case (input is free).
PRICES = {
    "scripted/metered": {"input": 0, "output": 10},
    "scripted/dearer": {"input": 0, "output": 40},
}
CALL_USD = 0.01
WRITES_ALL = {"input_tokens": 0, "output_tokens": 1_000}


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, costs={"prices": PRICES}, workers={"capacity": 20})


def metered(name: str, turns: int, **fields: Any) -> dict[str, Any]:
    """An agent whose every call costs 0.01 USD: `turns - 1` echo calls, then an answer."""
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "echo", "input": {"i": i}}], "usage": WRITES_ALL}
        for i in range(turns - 1)
    ]
    script.append({"text": "done", "usage": WRITES_ALL})
    return {
        "name": name,
        "tools": ["echo"],
        "model": {
            "provider": "scripted",
            "name": "metered",
            "max_output_tokens": 1_000,
            "script": script,
        },
        **fields,
    }


async def make_budget(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post("/v1/budgets", json=body)
    assert response.status_code == 201, response.text
    budget: dict[str, Any] = response.json()
    return budget


async def test_racing_runs_make_exactly_the_calls_a_budget_has_room_for(
    client: httpx.AsyncClient,
) -> None:
    agent = await make_agent(client, metered("racer", turns=1))
    await make_budget(client, scope="agent", subject=agent, period="day", limit_usd=7 * CALL_USD)

    runs = await asyncio.gather(*(start(client, agent_id=agent) for _ in range(20)))
    settled = await asyncio.gather(*(settle(client, run["id"]) for run in runs))

    completed = [r for r in settled if r["status"] == "completed"]
    exhausted = [r for r in settled if r["stop_reason"] == "budget_exhausted"]
    assert len(completed) == 7 and len(exhausted) == 13
    for run in exhausted:  # failed for good: not queued for a retry, no call made
        assert run["status"] == "failed" and run["attempt"] == 1
        assert run["usage"]["output_tokens"] == 0
        assert "daily budget of agent" in run["error"]["message"]
    [budget] = (await client.get("/v1/budgets")).json()["items"]
    assert budget["current"]["spent_usd"] == pytest.approx(7 * CALL_USD)
    overview = (await client.get("/ui/overview")).text
    assert '<p class="total" data-figure="spent">$0.07</p>' in overview
    assert f'<tr data-budget="{budget["id"]}">' in overview and "$0.07 of $0.07" in overview
    assert budget["current"]["reserved_usd"] == 0 and budget["current"]["remaining_usd"] == 0
    assert budget["current"]["spent_percent"] == 100
    costs = (await client.get("/v1/costs", params={"agent_id": agent})).json()
    assert costs["total"]["calls"] == 7


async def test_a_run_s_own_limit_stops_it_before_the_call_that_would_pass_it(
    client: httpx.AsyncClient,
) -> None:
    agent = await make_agent(client, metered("capped", turns=3, limits={"max_cost_usd": 0.025}))
    run = await settle(client, (await start(client, agent_id=agent))["id"])

    assert run["status"] == "failed" and run["stop_reason"] == "budget_exhausted"
    assert run["usage"]["cost_usd"] == pytest.approx(2 * CALL_USD)  # the third did not fit
    assert run["error"]["message"].startswith(f"run {run['id']}: 0.020000 of 0.025000 USD")
    events = (await client.get(f"/v1/runs/{run['id']}/history")).json()["items"][-1]["events"]
    assert "agent.budget.exhausted" in events
    retried = await client.post(f"/v1/runs/{run['id']}/retry")
    assert retried.status_code == 200  # a person may retry it: with no more room, it stops
    again = await settle(client, run["id"])
    assert again["stop_reason"] == "budget_exhausted"
    assert again["usage"]["cost_usd"] == pytest.approx(2 * CALL_USD)


async def test_a_call_s_worst_case_is_that_of_the_dearer_of_its_model_and_the_fallback(
    client: httpx.AsyncClient,
) -> None:
    """The fallback may answer any call, so a call reserves what the fallback could cost
    when it is dearer: here 0.04 USD, past the run's 0.025 (the model's own 0.01 fits)."""
    body = metered("falls_back_dearly", turns=1, limits={"max_cost_usd": 0.025})
    body["model"]["fallback_name"] = "dearer"
    run = await settle(client, (await start(client, agent_id=await make_agent(client, body)))["id"])

    assert run["stop_reason"] == "budget_exhausted" and run["usage"]["output_tokens"] == 0
    assert run["error"]["message"] == (
        f"run {run['id']}: 0.000000 of 0.025000 USD spent or reserved, "
        "and the next call may cost 0.040000"
    )


async def test_a_task_out_of_budget_stays_where_it_is(
    settings: Settings, clean_db: AsyncEngine
) -> None:
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as client:
        agent = await make_agent(client, metered("tasked", turns=3))
        task = await create_task(client, assigned_to=agent, budget_limit=0.015)
        run = await settle(client, await first_task_run(client, task["id"]))
        assert run["stop_reason"] == "budget_exhausted"
        assert run["usage"]["cost_usd"] == pytest.approx(CALL_USD)
        assert run["error"]["message"].startswith(f"task {task['id']}: 0.010000 of 0.015000")
    # The server has stopped, and its task/run bridge synced every run event before it did:
    # whatever it would do with this run is done.
    async with clean_db.connect() as conn:
        status = await conn.scalar(text("SELECT status FROM tasks WHERE id = :id"), task)
        lane_runs = await conn.scalar(
            text("SELECT count(*) FROM runs WHERE lane = :lane"), {"lane": f"task:{task['id']}"}
        )
    assert status == "in_progress" and lane_runs == 1  # not failed, and no retry run


async def test_a_project_budget_counts_its_tasks_runs_and_alerts_once_per_threshold(
    client: httpx.AsyncClient,
) -> None:
    agent = await make_agent(client, metered("worker", turns=1))
    budget = await make_budget(
        client, scope="project", subject="apollo", period="month", limit_usd=4 * CALL_USD
    )
    outside = await settle(client, (await start(client, agent_id=agent))["id"])
    assert outside["status"] == "completed"  # no project: not counted against apollo
    statuses = []
    for i in range(5):
        task = await create_task(client, title=f"t{i}", assigned_to=agent, project="apollo")
        run = await settle(client, await first_task_run(client, task["id"]))
        statuses.append(run["status"])
    assert statuses == ["completed"] * 4 + ["failed"]

    async with client.stream("GET", "/v1/budgets/events", params={"last_event_id": 0}) as stream:
        alerts = await SseReader(stream).take(3)
    assert [(a.event, a.data["threshold"]) for a in alerts] == [
        ("budget.alert", 50),
        ("budget.alert", 80),
        ("budget.alert", 100),
    ]
    first = alerts[0].data
    assert first["budget_id"] == budget["id"] and first["subject"] == "apollo"
    assert first["spent_usd"] == pytest.approx(2 * CALL_USD)
    assert alerts[2].data["spent_usd"] == pytest.approx(4 * CALL_USD)


async def test_the_budgets_resource(client: httpx.AsyncClient) -> None:
    agent = await make_agent(client, metered("owner", turns=1))
    body = {"scope": "agent", "subject": agent, "period": "month", "limit_usd": 12.5}
    made = await client.post("/v1/budgets", json=body, headers={"Idempotency-Key": "b-1"})
    assert made.status_code == 201, made.text
    budget = made.json()
    assert made.headers["ETag"] == '"1"' and made.headers["Location"].endswith(budget["id"])
    current = budget["current"]
    assert current["period_start"].endswith("-01") and current["spent_usd"] == 0
    assert current["remaining_usd"] == 12.5
    again = await client.post("/v1/budgets", json=body, headers={"Idempotency-Key": "b-1"})
    assert again.json()["id"] == budget["id"] and again.headers["Idempotent-Replayed"] == "true"
    twice = await client.post("/v1/budgets", json=body)
    assert "already" in assert_problem(twice, 409, "conflict")["detail"]
    nobody = await client.post("/v1/budgets", json=body | {"subject": "agt_nobody"})
    problem = assert_problem(nobody, 422, "validation_error")
    assert problem["errors"][0]["field"] == "body.subject"
    for bad in ({"limit_usd": 0}, {"period": "week"}, {"scope": "team"}):
        assert_problem(await client.post("/v1/budgets", json=body | bad), 422, "validation_error")

    daily = await make_budget(client, scope="project", subject="apollo", period="day", limit_usd=1)
    listed = (await client.get("/v1/budgets", params={"scope": "project"})).json()["items"]
    assert [b["id"] for b in listed] == [daily["id"]]
    assert daily["current"]["period_start"] == daily["current"]["period_end"]

    stale = await client.patch(
        f"/v1/budgets/{budget['id']}", json={"limit_usd": 20}, headers={"If-Match": '"9"'}
    )
    assert_problem(stale, 409, "version_conflict")
    changed = await client.patch(
        f"/v1/budgets/{budget['id']}", json={"limit_usd": 20}, headers={"If-Match": '"1"'}
    )
    assert changed.status_code == 200 and changed.json()["limit_usd"] == 20
    assert changed.headers["ETag"] == '"2"'
    today = daily["current"]["period_start"]
    listed_by_cli = await cli(str(client.base_url), "budgets")
    assert listed_by_cli.code == 0, listed_by_cli
    header, *lines = listed_by_cli.out.splitlines()
    assert header.split() == ["BUDGET", "FOR", "PERIOD", "LIMIT", "SPENT", "RESERVED", "USED"]
    assert [line.split()[:4] for line in lines] == [
        [budget["id"], "agent", "owner", f"{current['period_start']}..{current['period_end']}"],
        [daily["id"], "project", "apollo", f"{today}..{today}"],
    ]
    gone = await client.delete(f"/v1/budgets/{budget['id']}")
    assert gone.status_code == 204
    assert_problem(await client.get(f"/v1/budgets/{budget['id']}"), 404, "not_found")
    assert_problem(await client.delete(f"/v1/budgets/{budget['id']}"), 404, "not_found")
    await client.delete(f"/v1/budgets/{daily['id']}")
    none_left = await cli(str(client.base_url), "budgets")
    assert none_left.out.startswith("no budgets: runs spend without a limit")


def _call(day: date, usd: str) -> CallCost:
    return CallCost(day, "agt_a", "lane", "p", "m", 0, 0, 0, 0, Decimal(usd))


async def test_a_period_starts_afresh_and_its_alerts_with_it(clean_db: AsyncEngine) -> None:
    """Days and months roll over by the date given (the service's clock, injected here)."""
    sessions = async_sessionmaker(clean_db)
    march_31, april_1 = date(2026, 3, 31), date(2026, 4, 1)
    async with sessions.begin() as session:
        for period, budget_id in (("day", "bgt_day"), ("month", "bgt_month")):
            await budget_store.insert_budget(
                session,
                {
                    "id": budget_id,
                    "scope": "agent",
                    "subject": "agt_a",
                    "period": period,
                    "limit_usd": Decimal(1),
                    "version": 1,
                },
                today=march_31,
            )
        await cost_store.record(session, [_call(date(2026, 3, 30), "0.3"), _call(march_31, "0.3")])
    async with sessions.begin() as session:
        on_31st = await budget_store.due_alerts(session, [("agt_a", "")], today=march_31)
        again = await budget_store.due_alerts(session, [("agt_a", "")], today=march_31)
        month = await budget_store.get_budget(session, "bgt_month", today=march_31)
        day = await budget_store.get_budget(session, "bgt_day", today=april_1)
        next_month = await budget_store.get_budget(session, "bgt_month", today=april_1)
    assert [(b.id, t) for b, t in on_31st] == [("bgt_month", 50)]  # 0.6 of 1 this month
    assert again == []  # once a period
    assert month is not None and month.current.spent_usd == pytest.approx(0.6)
    assert month.current.period_end == march_31
    assert day is not None and day.current.spent_usd == 0 and day.current.period_start == april_1
    assert next_month is not None and next_month.current.spent_usd == 0
    async with sessions.begin() as session:
        await cost_store.record(session, [_call(april_1, "0.5")])
        in_april = await budget_store.due_alerts(session, [("agt_a", "")], today=april_1)
    assert sorted((b.id, t) for b, t in in_april) == [("bgt_day", 50), ("bgt_month", 50)]
