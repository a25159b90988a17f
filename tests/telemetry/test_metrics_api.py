"""`GET /metrics` through a real server: a Prometheus scrape shows the runs by status and
the queue depth from the database, and what the loops of this process did (run outcomes,
lane waits); it asks for the API key when keys are configured."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.states import RunStatus
from tests.support.api import assert_problem
from tests.support.factories import make_agent, settle, start_run, unique
from tests.support.server import make_settings, running_server

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(client: httpx.AsyncClient, **headers: str) -> Samples:
    response = await client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def grown(before: Samples, after: Samples, name: str, **labels: str) -> float:
    """How much a sample grew between two scrapes: the server is shared, so its figures
    count other tests' runs too, and only the difference is this test's."""
    return value(after, name, **labels) - before.get((name, frozenset(labels.items())), 0.0)


ASKS: tuple[dict[str, Any], ...] = (
    {"tool_calls": [{"name": "ask_human", "input": {"question": "ok?"}}]},
    {"text": "thanks"},
)


async def _agent(client: httpx.AsyncClient, *turns: dict[str, Any], **fields: Any) -> str:
    return str((await make_agent(client, *turns, **fields))["id"])


async def test_a_scrape_counts_runs_by_status_and_the_queue_behind_a_held_lane(
    client: httpx.AsyncClient,
) -> None:
    before = await scrape(client)
    answers = await _agent(client, {"text": "done"})
    for run in [await start_run(client, answers) for _ in range(3)]:
        assert (await settle(client, run["id"]))["status"] == "completed"
    asks = await _agent(client, *ASKS, tools=["ask_human"])
    lane = unique("team:metrics")
    holder = await start_run(client, asks, lane=lane)
    assert (await settle(client, holder["id"]))["status"] == "waiting_on_human"
    for _ in range(2):
        await start_run(client, asks, lane=lane)

    samples = await scrape(client)

    by_status = {
        s.value: grown(before, samples, "loopwright_runs", status=s.value) for s in RunStatus
    }
    expected = {"completed": 3.0, "waiting_on_human": 1.0, "queued": 2.0}
    assert by_status == {s.value: 0.0 for s in RunStatus} | expected
    assert grown(before, samples, "loopwright_queue_depth", queue="runs") == 2
    assert grown(before, samples, "loopwright_queue_depth", queue="task_engine") == 0


async def test_a_scrape_shows_the_outcomes_and_lane_waits_of_this_processs_loops(
    client: httpx.AsyncClient,
) -> None:
    before = await scrape(client)
    agent_id = await _agent(client, {"text": "done"})
    lane = unique("team:waits")
    first = await start_run(client, agent_id, lane=lane)
    second = await start_run(client, agent_id, lane=lane)
    for run in (first, second):
        assert (await settle(client, run["id"]))["status"] == "completed"

    samples = await scrape(client)

    assert grown(before, samples, "loopwright_run_outcomes_total", status="completed") == 2
    assert grown(before, samples, "loopwright_run_outcomes_total", status="failed") == 0
    assert grown(before, samples, "loopwright_lane_wait_seconds_count") == 2
    waited_s = grown(before, samples, "loopwright_lane_wait_seconds_sum")
    assert 0 <= waited_s < 20  # the second run waited for the first to finish, briefly
    assert grown(before, samples, "loopwright_lane_wait_seconds_bucket", le="+Inf") == 2


async def test_runs_cancelled_before_any_loop_held_them_are_outcomes_too(
    client: httpx.AsyncClient,
) -> None:
    before = await scrape(client)
    asks = await _agent(client, *ASKS, tools=["ask_human"])
    lane = unique("team:cancels")
    holder = await start_run(client, asks, lane=lane)
    assert (await settle(client, holder["id"]))["status"] == "waiting_on_human"
    queued = await start_run(client, asks, lane=lane)
    for run in (queued, holder):  # one waits in the queue, one on a person
        response = await client.post(f"/v1/runs/{run['id']}/cancel")
        assert response.json()["status"] == "cancelled"

    samples = await scrape(client)

    assert grown(before, samples, "loopwright_run_outcomes_total", status="cancelled") == 2


async def test_metrics_are_not_part_of_the_openapi_document(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert "/metrics" not in paths and "/healthz" in paths


async def test_a_scrape_needs_the_api_key_when_keys_are_configured(
    database_url: str, clean_db: AsyncEngine
) -> None:
    settings = make_settings(database_url, auth={"api_keys": ["k-one"]})
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
        assert_problem(await http.get("/metrics"), 401, "unauthorized")
        samples = await scrape(http, Authorization="Bearer k-one")
        assert value(samples, "loopwright_queue_depth", queue="runs") == 0


async def test_a_scrape_with_the_database_down_is_a_503_problem() -> None:
    settings = make_settings(
        "postgresql://postgres@127.0.0.1:1/none", database={"pool_timeout_s": 2.0}
    )
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
        assert_problem(await http.get("/metrics"), 503, "unavailable")
