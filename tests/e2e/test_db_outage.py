"""A database outage under real processes: a `loopwright serve` (API only) and a
`loopwright worker` run a batch of runs that call a side-effecting and an idempotent tool,
while a separate admin connection terminates every connection of the test's database
(`pg_terminate_backend`) again and again for a few seconds, and a client keeps calling the
API. No request gets a 500 (an outage is a 503 problem document), every run completes,
each run makes each of its effects exactly once, and none is parked `resume_unsafe`."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.connection import libpq_url
from tests.support.cluster import Cluster
from tests.support.factories import scripted_agent
from tests.support.outage_tools import EFFECTS_DDL, LEDGER_APPLICATION, OUTAGE_ON

# Timing: connections cut again and again for seconds.
pytestmark = [pytest.mark.e2e, pytest.mark.alone]

RUNS = 32
CAPACITY = 8
STEPS = (1, 2)  # each run charges once per step
OUTAGE_S = 4.0  # shorter than the lease (LEASE_TTL_S below)
# Round after round, with no pause: a connection made between two rounds lives a few
# milliseconds at most, so the database is away for the app (not merely flaky).
KILL_EVERY_S = 0.0
SETTLE_TIMEOUT_S = 60.0
SETTLED = (
    "completed",
    "waiting_on_human",
    "failed",
    "dead_letter",
    "timed_out",
    "cancelled",
)  # inside the test's 120 s, with the processes' start-up
SCRIPT = [
    {"tool_calls": [{"name": "look_up", "input": {"q": "balance"}}], "latency_ms": 300},
    # Held until the outage begins: the effect is made, its answer not yet recorded.
    {"tool_calls": [{"name": "charge", "input": {"step": 1, "hold": True}}], "latency_ms": 300},
    {"tool_calls": [{"name": "look_up", "input": {"q": "receipt"}}], "latency_ms": 300},
    {"tool_calls": [{"name": "charge", "input": {"step": 2}}], "latency_ms": 300},
    {"text": "all charged", "latency_ms": 300},
]


async def _fetch(dsn: str, query: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


async def _execute_spared(dsn: str, query: str) -> None:
    """On a connection the outage spares (the tools' own ledger)."""
    conn = await asyncpg.connect(dsn, server_settings={"application_name": LEDGER_APPLICATION})
    try:
        await conn.execute(query)
    finally:
        await conn.close()


def _admin_dsn(dsn: str) -> str:
    """The same server, another database: the terminator is none of the test's connections."""
    return urlunsplit(urlsplit(dsn)._replace(path="/postgres"))


async def _outage(admin_dsn: str, dsn: str, database: str, seconds: float) -> tuple[int, Any]:
    """Terminate the app's connections to `database` every KILL_EVERY_S for `seconds`
    (after the first round, let the held calls answer); the number terminated, and when
    the outage began (the server's clock)."""
    admin = await asyncpg.connect(admin_dsn)
    try:
        began = await admin.fetchval("SELECT clock_timestamp()")
        terminated = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            rows = await admin.fetch(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = $1 AND application_name <> $2 AND pid <> pg_backend_pid()",
                database,
                LEDGER_APPLICATION,
            )
            if terminated == 0:
                await _execute_spared(dsn, OUTAGE_ON)
            terminated += len(rows)
            await asyncio.sleep(KILL_EVERY_S)  # the outage's schedule, not a synchronisation
        return terminated, began
    finally:
        await admin.close()


async def _client(
    url: str, agent_id: str, run_ids: list[str], stop: asyncio.Event
) -> tuple[Counter[int], list[str], dict[str, str | None]]:
    """A client calling the API throughout: lists, reads and creates (with an
    Idempotency-Key). The statuses seen, what 503s said, and the creates by key (None:
    not acknowledged)."""
    statuses: Counter[int] = Counter()
    unavailable: list[str] = []
    created: dict[str, str | None] = {}
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        for i in itertools.count():
            if stop.is_set():
                break
            requests = [
                http.get("/v1/runs", params={"limit": 20}),
                http.get(f"/v1/runs/{run_ids[i % len(run_ids)]}"),
            ]
            if i % 5 == 0:
                key = f"during-outage-{i}"
                created[key] = None
                requests.append(_create(http, agent_id, key))
            for response in await asyncio.gather(*requests):
                statuses[response.status_code] += 1
                if response.status_code == 503:
                    assert response.headers["content-type"] == "application/problem+json"
                    unavailable.append(response.json()["code"])
                if response.status_code == 202:
                    created[response.request.headers["Idempotency-Key"]] = response.json()["id"]
    return statuses, unavailable, created


def _create(http: Any, agent_id: str, key: str) -> Any:
    body = {"agent_id": agent_id, "input": f"pay {key}"}
    return http.post("/v1/runs", json=body, headers={"Idempotency-Key": key})


async def _during_outage(
    url: str, admin_dsn: str, dsn: str, database: str, agent_id: str, run_ids: list[str]
) -> tuple[int, Any, Counter[int], list[str], dict[str, str | None]]:
    stop = asyncio.Event()
    client = asyncio.create_task(_client(url, agent_id, run_ids, stop))
    try:
        terminated, began = await _outage(admin_dsn, dsn, database, OUTAGE_S)
    finally:
        stop.set()
    statuses, unavailable, created = await client
    return terminated, began, statuses, unavailable, created


def _runs(http: httpx.Client, ids: set[str]) -> dict[str, dict[str, Any]]:
    return {i: http.get(f"/v1/runs/{i}").json() for i in ids}


def test_a_short_database_outage_parks_no_run_and_repeats_no_effect(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    dsn = libpq_url(database_url)
    database = urlsplit(dsn).path.lstrip("/")
    asyncio.run(_execute_spared(dsn, EFFECTS_DDL))
    env = {
        "OUTAGE_EFFECTS_DSN": dsn,
        "LOOPWRIGHT_TOOLS__PLUGINS": '["tests.support.outage_tools:tools"]',
        "LOOPWRIGHT_WORKERS__CAPACITY": str(CAPACITY),
        "LOOPWRIGHT_WORKERS__LEASE_TTL_S": "15",
        "LOOPWRIGHT_WORKERS__POLL_INTERVAL_S": "0.2",
        # A run whose lease lapsed would be timed out (and resumed) within a second.
        "LOOPWRIGHT_RECONCILER__INTERVAL_S": "1",
        "LOOPWRIGHT_WORKERS__RETRY_BASE_DELAY_S": "0",
    }
    with Cluster(database_url, tmp_path, env) as cluster:
        api = cluster.server()
        with httpx.Client(base_url=api.url, timeout=30) as http:
            agent = scripted_agent(
                http, "cashier", SCRIPT, tools=["look_up", "charge"], auto_approve=["charge"]
            )
            started = [
                http.post("/v1/runs", json={"agent_id": agent["id"], "input": f"pay {i}"})
                for i in range(RUNS)
            ]
            assert all(r.status_code == 202 for r in started)
            run_ids = [r.json()["id"] for r in started]
            worker = cluster.worker()
            deadline = time.monotonic() + SETTLE_TIMEOUT_S
            # Every slot holds a charge made and not yet answered.
            held = "SELECT count(*) AS n FROM outage_effects"
            while asyncio.run(_fetch(dsn, held))[0]["n"] < CAPACITY:
                assert time.monotonic() < deadline, worker.log()
                time.sleep(0.05)  # polling another process's progress; no clock to inject

            terminated, began, statuses, unavailable, created = asyncio.run(
                _during_outage(api.url, _admin_dsn(dsn), dsn, database, agent["id"], run_ids)
            )

            # The client sends again, with the same key, the creates the outage refused.
            for key, run_id in created.items():
                if run_id is None:
                    again = _create(http, agent["id"], key)
                    assert again.status_code == 202, again.text
                    created[key] = again.json()["id"]
            all_ids = set(run_ids) | {i for i in created.values() if i is not None}
            while True:
                runs = _runs(http, all_ids)
                if all(r["status"] in SETTLED for r in runs.values()):
                    break
                assert time.monotonic() < deadline, Counter(r["status"] for r in runs.values())
                time.sleep(0.2)  # polling another process's progress; no clock to inject

    assert terminated >= 10, "the outage never reached the app's connections"
    assert statuses[500] == 0, statuses
    assert set(unavailable) <= {"unavailable"}, unavailable
    assert sum(statuses.values()) >= 20, statuses  # the API was called throughout

    parked = {i: r["waiting_for"] for i, r in runs.items() if r["status"] != "completed"}
    assert parked == {}, parked
    assert all(r["result"] == "all charged" for r in runs.values())

    effects = asyncio.run(
        _fetch(dsn, "SELECT run_id, step, count(*) AS n FROM outage_effects GROUP BY 1, 2")
    )
    counted = {(e["run_id"], e["step"]): e["n"] for e in effects}
    assert counted == {(run_id, step): 1 for run_id in all_ids for step in STEPS}

    # The outage landed on calls in flight: effects made before it, whose answers the
    # worker could only record once the database was back.
    in_flight = asyncio.run(
        _fetch(dsn, "SELECT count(*) AS n FROM outage_effects WHERE at < $1", began)
    )[0]["n"]
    assert in_flight >= CAPACITY
    assert "database connection lost" in worker.log_path.read_text()
    print(
        json.dumps({"terminated": terminated, "calls_in_flight": in_flight, "statuses": statuses})
    )
