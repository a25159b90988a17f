"""What LLM calls cost, through the real service: each call priced from the table and
recorded with its step, summed on the run, and totalled by agent, project, model and day
(`GET /v1/costs`); a model without a price is counted as unpriced, never as free."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from app.core.config import Settings
from app.costs.schemas.costs import CostGroupBy
from app.costs.store import costs as cost_store
from app.costs.store.costs import CallCost
from tests.runs.test_runs_api import make_agent, settle, start
from tests.support.api import assert_problem, first_task_run
from tests.support.cli import cli
from tests.support.factories import create_task
from tests.support.server import make_settings
from tests.telemetry.test_metrics_api import scrape, value

pytestmark = pytest.mark.own_server  # settings of its own (`settings` below)

# 1,000 tokens in at 3 USD a million and 200 out at 15: 0.006 USD a call.
SPEND = {"input_tokens": 1_000, "output_tokens": 200}


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(
        database_url, costs={"prices": {"scripted/priced": {"input": 3, "output": 15}}}
    )


def _agent(name: str, model: str, *turns: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "tools": ["echo"],
        "model": {"provider": "scripted", "name": model, "script": list(turns)},
    }


WRITER = _agent(
    "writer",
    "priced",
    {"tool_calls": [{"name": "echo", "input": {"x": 1}}], "usage": SPEND},
    {"text": "done", "usage": SPEND},
)
LOCAL = _agent("local", "on-my-laptop", {"text": "done"})


async def test_costs_are_summed_on_runs_and_totalled_by_agent_project_model_and_day(
    client: httpx.AsyncClient,
) -> None:
    writer = await make_agent(client, WRITER)
    local = await make_agent(client, LOCAL)
    task = await create_task(client, project="apollo", assigned_to=writer)
    direct = await settle(client, (await start(client, agent_id=writer))["id"])
    unpriced = await settle(client, (await start(client, agent_id=local))["id"])
    on_task = await settle(client, await first_task_run(client, task["id"]))

    for run in (direct, on_task):
        assert run["usage"]["cost_usd"] == pytest.approx(0.012)
        assert run["usage"]["input_tokens"] == 2_000 and run["usage"]["unpriced_calls"] == 0
    assert unpriced["usage"]["cost_usd"] is None and unpriced["usage"]["unpriced_calls"] == 1
    # Each call is recorded with the step that counts it.
    steps = (await client.get(f"/v1/runs/{direct['id']}/history")).json()["items"]
    calls = [s["call"] for s in steps if s["call"] is not None]
    assert (
        calls
        == [
            {
                "provider": "scripted",
                "model": "priced",
                "input_tokens": 1_000,
                "output_tokens": 200,
                "cache_write_tokens": 0,
                "cache_read_tokens": 0,
                "cost_usd": 0.006,
            }
        ]
        * 2
    )

    async def report(group_by: str, **params: str) -> dict[str, Any]:
        response = await client.get("/v1/costs", params={"group_by": group_by, **params})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def lines(body: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
        return {i["key"]: (i["calls"], i["cost_usd"], i["unpriced_calls"]) for i in body["items"]}

    by_agent = await report("agent")
    assert lines(by_agent) == {writer: (4, pytest.approx(0.024), 0), local: (1, 0, 1)}
    assert list(lines(by_agent)) == [writer, local]  # the costliest first
    assert by_agent["total"]["calls"] == 5 and by_agent["total"]["unpriced_calls"] == 1
    assert by_agent["total"]["cost_usd"] == pytest.approx(0.024)
    today = datetime.now(UTC).date()
    assert by_agent["start"] == today.replace(day=1).isoformat()
    assert by_agent["end"] == today.isoformat()
    by_project = await report("project")
    assert lines(by_project) == {
        "apollo": (2, pytest.approx(0.012), 0),
        "": (3, pytest.approx(0.012), 1),
    }
    assert lines(await report("model")) == {
        "scripted/priced": (4, pytest.approx(0.024), 0),
        "scripted/on-my-laptop": (1, 0, 1),
    }
    assert list(lines(await report("day"))) == [today.isoformat()]
    assert list(lines(await report("month"))) == [today.isoformat()[:7]]
    assert lines(await report("task")) == {
        task["id"]: (2, pytest.approx(0.012), 0),
        "": (3, pytest.approx(0.012), 1),
    }
    assert lines(await report("agent", task_id=task["id"])) == {
        writer: (2, pytest.approx(0.012), 0)
    }
    only_apollo = await report("agent", project="apollo")
    assert lines(only_apollo) == {writer: (2, pytest.approx(0.012), 0)}
    assert lines(await report("model", agent_id=local)) == {"scripted/on-my-laptop": (1, 0, 1)}
    yesterday = (today - timedelta(days=1)).isoformat()
    assert (await report("agent", start=yesterday, end=yesterday))["items"] == []

    board = (await client.get("/ui/runs")).text
    row = board[board.index(f'id="run-{direct["id"]}"') :]
    assert '<td data-label="Cost" class="num">$0.01</td>' in row[: row.index("</tr>")]
    unknown_row = board[board.index(f'id="run-{unpriced["id"]}"') :]
    assert (
        'title="Not known: a model without a price">—</td>'
        in unknown_row[: unknown_row.index("</tr>")]
    )
    page = (await client.get(f"/ui/runs/{direct['id']}")).text
    assert "2000 in · 400 out tokens · $0.01" in page

    samples = await scrape(client)
    priced = {"provider": "scripted", "model": "priced"}
    assert value(samples, "loopwright_llm_cost_usd_total", **priced) == pytest.approx(0.024)
    assert value(samples, "loopwright_llm_tokens_total", **priced, kind="output") == 800
    unknown = {"provider": "scripted", "model": "on-my-laptop"}
    assert value(samples, "loopwright_llm_unpriced_calls_total", **unknown) == 1


async def test_the_cli_prints_costs_by_agent_and_a_run_s_cost(
    client: httpx.AsyncClient, base_url: str
) -> None:
    writer = await make_agent(client, WRITER)
    local = await make_agent(client, LOCAL)
    run = await settle(client, (await start(client, agent_id=writer))["id"])
    unpriced = await settle(client, (await start(client, agent_id=local))["id"])
    estimated = unpriced["usage"]["input_tokens"]  # from the prompt's length

    listed = await cli(base_url, "costs")
    assert listed.code == 0, listed
    period, header, *rows = listed.out.splitlines()
    assert period.endswith("(UTC)")
    assert header.split() == ["AGENT", "CALLS", "TOKENS", "IN", "OUT", "USD", "UNPRICED", "CALLS"]
    assert [r.split() for r in rows] == [
        ["writer", "2", "2000", "400", "$0.01"],
        ["local", "1", str(estimated), "1", "?", "1"],
        ["total", "3", str(2000 + estimated), "401", "$0.01", "1"],
    ]
    by_model = await cli(base_url, "costs", "--by", "model", "--end", "2000-01-31")
    assert by_model.code == 0 and by_model.out.splitlines()[0] == "2000-01-01 to 2000-01-31 (UTC)"
    shown = await cli(base_url, "show", run["id"])
    assert "cost $0.01" in shown.out, shown


async def test_a_report_s_range_and_grouping_are_checked(client: httpx.AsyncClient) -> None:
    backwards = await client.get("/v1/costs", params={"start": "2026-02-01", "end": "2026-01-31"})
    assert assert_problem(backwards, 422, "validation_error")["errors"][0]["field"] == "query.start"
    decades = await client.get("/v1/costs", params={"start": "2000-01-01", "end": "2026-01-01"})
    assert decades.status_code == 200 and decades.json()["items"] == []
    unknown = await client.get("/v1/costs", params={"group_by": "colour"})
    assert_problem(unknown, 422, "validation_error")
    not_a_day = await client.get("/v1/costs", params={"start": "yesterday"})
    assert_problem(not_a_day, 422, "validation_error")


def _call(day: date, cost: str | None, *, agent: str = "agt_a", model: str = "m") -> CallCost:
    return CallCost(
        day=day,
        agent_id=agent,
        lane="lane-a",
        provider="p",
        model=model,
        input_tokens=10,
        output_tokens=5,
        cache_write_tokens=1,
        cache_read_tokens=2,
        cost_usd=None if cost is None else Decimal(cost),
    )


async def test_calls_add_to_their_day_s_totals_and_a_range_counts_its_days_only(
    clean_db: AsyncEngine,
) -> None:
    first, second, third = date(2026, 3, 30), date(2026, 3, 31), date(2026, 4, 1)
    sessions = async_sessionmaker(clean_db)
    async with sessions.begin() as session:
        await cost_store.record(
            session,
            [_call(first, "0.5"), _call(second, "0.25"), _call(second, None), _call(third, "1")],
        )
    async with sessions.begin() as session:  # a second batch adds to the same rows
        await cost_store.record(session, [_call(second, "0.125", model="n"), _call(second, "2")])
    async with sessions() as session:
        days = await cost_store.totals(session, CostGroupBy.DAY, start=second, end=third)
        march = await cost_store.totals(session, CostGroupBy.MODEL, start=first, end=second)
    assert [(d.key, d.calls, d.cost_usd, d.unpriced_calls) for d in days] == [
        ("2026-03-31", 4, 2.375, 1),
        ("2026-04-01", 1, 1.0, 0),
    ]
    assert [(m.key, m.calls, m.cost_usd, m.input_tokens, m.cache_read_tokens) for m in march] == [
        ("p/m", 4, 2.75, 40, 8),
        ("p/n", 1, 0.125, 10, 2),
    ]
