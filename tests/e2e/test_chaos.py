"""Chaos: 200 runs mixing idempotent and side-effecting tools, executed by two real
`loopwright worker` processes that are SIGKILLed at random moments and restarted until
every run settles. A side effect is never executed twice, no run is lost, and every
acknowledged run and event is still there."""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.db import libpq_url
from tests.support.chaos_tools import LEDGER_DDL
from tests.support.processes import ServerProcess, WorkerProcess

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
RUNS = 200
SETTLE_TIMEOUT_S = 420
SCRIPT = [
    {"tool_calls": [{"name": "look_up", "input": {"q": "balance"}}], "latency_ms": 30},
    {"tool_calls": [{"name": "charge_card", "input": {"amount": 5}}], "latency_ms": 30},
    {"tool_calls": [{"name": "look_up", "input": {"q": "receipt"}}], "latency_ms": 30},
    {"tool_calls": [{"name": "charge_card", "input": {"amount": 7}}], "latency_ms": 30},
    {"text": "all charged", "latency_ms": 30},
]
MAX_KILLS = 20


async def _sql(dsn: str, query: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(query))
    finally:
        await conn.close()


def _statuses(http: httpx.Client) -> dict[str, dict[str, Any]]:
    runs: dict[str, dict[str, Any]] = {}
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 200, **({"cursor": cursor} if cursor else {})}
        page = http.get("/v1/runs", params=params).json()
        runs.update({r["id"]: r for r in page["items"]})
        cursor = page["next_cursor"]
        if cursor is None:
            return runs


def _settled(run: dict[str, Any]) -> bool:
    return run["status"] in ("completed", "waiting_on_human")


def test_killed_workers_never_duplicate_a_side_effect_nor_lose_a_run(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    dsn = libpq_url(database_url)
    asyncio.run(_sql(dsn, LEDGER_DDL))
    env = {
        "DATABASE_URL": database_url,
        "CHAOS_LEDGER_DSN": dsn,
        "PYTHONPATH": str(ROOT),
        "LOOPWRIGHT_TOOLS__PLUGINS": '["tests.support.chaos_tools:tools"]',
        "LOOPWRIGHT_WORKERS__CAPACITY": "4",
        "LOOPWRIGHT_WORKERS__LEASE_TTL_S": "2",
        "LOOPWRIGHT_WORKERS__POLL_INTERVAL_S": "0.2",
        "LOOPWRIGHT_RECONCILER__INTERVAL_S": "1",
    }
    api = ServerProcess({**env, "LOOPWRIGHT_WORKERS__ENABLED": "false"}, tmp_path / "api.log")
    workers = [WorkerProcess(env, tmp_path / f"worker{i}.log") for i in range(2)]
    rng = random.Random(20261121)
    kills = 0
    api.start()
    try:
        with httpx.Client(base_url=api.url, timeout=30) as http:
            agent = http.post(
                "/v1/agents",
                json={
                    "name": "cashier",
                    "tools": ["look_up", "charge_card"],
                    "auto_approve": ["charge_card"],  # this test is about crashes
                    "model": {"provider": "scripted", "name": "s", "script": SCRIPT},
                },
            ).json()
            acknowledged = [
                http.post("/v1/runs", json={"agent_id": agent["id"], "input": f"pay {i}"})
                for i in range(RUNS)
            ]
            assert all(r.status_code == 202 for r in acknowledged)
            run_ids = {r.json()["id"] for r in acknowledged}
            for worker in workers:
                worker.start()

            deadline = time.monotonic() + SETTLE_TIMEOUT_S
            while True:
                runs = _statuses(http)
                if all(_settled(runs[i]) for i in run_ids):
                    break
                assert time.monotonic() < deadline, {
                    s: sum(1 for r in runs.values() if r["status"] == s)
                    for s in {r["status"] for r in runs.values()}
                }
                # Random moments: kill a worker, bring it back. Stop after a while so
                # that the last runs can settle.
                time.sleep(rng.uniform(0.5, 2.0))  # the chaos schedule, not a synchronisation
                if kills < MAX_KILLS:
                    victim = rng.choice(workers)
                    victim.kill()
                    kills += 1
                    victim.spawn()  # back at once; it rejoins when it has booted
    finally:
        for worker in workers:
            if worker.process is not None and worker.process.poll() is None:
                worker.terminate_and_wait()
        api.terminate_and_wait()

    assert kills >= 5, "the runs settled before the chaos could start"
    ledger = asyncio.run(
        _sql(dsn, "SELECT run_id, tool_call_id, count(*) AS n FROM chaos_ledger GROUP BY 1, 2")
    )
    duplicates = [(r["run_id"], r["tool_call_id"], r["n"]) for r in ledger if r["n"] > 1]
    assert duplicates == [], "a side effect was executed twice"

    assert set(runs) >= run_ids  # every acknowledged run is still there
    halted = [runs[i] for i in run_ids if runs[i]["status"] == "waiting_on_human"]
    for run in halted:  # only a side-effecting call cut between start and finish halts a run
        assert run["waiting_for"]["reason"] == "resume_unsafe", run["waiting_for"]
        (call,) = asyncio.run(
            _sql(
                dsn,
                "SELECT tool, completed_at FROM tool_calls WHERE run_id = "
                f"'{run['id']}' AND tool_call_id = '{run['waiting_for']['tool_call_id']}'",
            )
        )
        assert call["tool"] == "charge_card" and call["completed_at"] is None
    completed = [runs[i] for i in run_ids if runs[i]["status"] == "completed"]
    assert all(r["result"] == "all charged" for r in completed)
    charged = {(r["run_id"], r["tool_call_id"]) for r in ledger}
    assert len({run_id for run_id, _ in charged}) >= len(completed)

    gaps = asyncio.run(
        _sql(
            dsn,
            "SELECT stream, count(*) AS n, max(seq) AS top FROM events "
            "WHERE stream LIKE 'run:%' GROUP BY stream HAVING count(*) <> max(seq)",
        )
    )
    assert gaps == [], "an event stream lost an event"
    print(json.dumps({"kills": kills, "completed": len(completed), "halted": len(halted)}))
