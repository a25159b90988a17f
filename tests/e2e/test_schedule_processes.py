"""Two real `loopwright serve` processes on one database, their schedulers looking every
50 ms: schedules that fall due at once, each with several fire times missed, are fired by
both at the same time, and make one run per fire time, and `next_fire_at` moves on once."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.runs.test_runs_api import make_agent, scripted
from tests.support.cluster import Cluster
from tests.support.processes import ServerProcess

# Timing: two schedulers racing every 50 ms.
pytestmark = [pytest.mark.e2e, pytest.mark.alone]

SCHEDULES = 10
MISSED = 5  # fire times passed per schedule (its `max_catchup`: all are fired)
DAY = timedelta(days=1)


async def _started(process: ServerProcess) -> float:
    """The process's count of schedule fires that started a run (replays are not
    counted: a replay starts nothing)."""
    async with httpx.AsyncClient(base_url=process.url, timeout=10) as http:
        metrics = (await http.get("/metrics")).text
    for line in metrics.splitlines():
        labels = ('kind="schedule"', 'status="started"')
        if line.startswith("loopwright_trigger_fires_total{") and all(x in line for x in labels):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_two_serve_processes_make_one_run_per_fire_time(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    env = {"LOOPWRIGHT_TRIGGERS__SCHEDULER_INTERVAL_S": "0.05"}
    with Cluster(database_url, tmp_path, env) as cluster:
        # API only, no worker anywhere: the runs stay queued, counted, not run.
        servers = [cluster.server(f"serve{i}") for i in range(2)]
        async with httpx.AsyncClient(base_url=servers[0].url, timeout=10) as http:
            agent_id = await make_agent(http, scripted({"text": "done"}))
            ids = []
            for i in range(SCHEDULES):
                created = await http.post(
                    "/v1/triggers",
                    json={
                        "kind": "schedule",
                        "name": f"daily {i}",
                        "config": {
                            "interval_s": 86_400,
                            "misfire": "run_all",
                            "max_catchup": MISSED,
                            "overlap": "enqueue",
                        },
                        "target": {"kind": "run", "agent_id": agent_id, "input": "tick"},
                    },
                )
                assert created.status_code == 201, created.text
                ids.append(created.json()["id"])
            armed = datetime.fromisoformat(created.json()["next_fire_at"])  # next midnight UTC

        # As if no process had been up for five days: each schedule has five times due.
        async with clean_db.begin() as conn:
            await conn.execute(
                text("UPDATE triggers SET next_fire_at = :due"), {"due": armed - MISSED * DAY}
            )
        deadline = time.monotonic() + 60
        while True:
            async with clean_db.connect() as conn:
                moved = await conn.scalar(
                    text("SELECT count(*) FROM triggers WHERE next_fire_at = :next"),
                    {"next": armed},
                )
            if moved == SCHEDULES:
                break
            assert time.monotonic() < deadline, moved
            await asyncio.sleep(0.1)  # other processes' progress; no clock to inject

        async with clean_db.connect() as conn:
            fires = (
                await conn.execute(
                    text("SELECT trigger_id, scheduled_for, status, run_id FROM trigger_fires")
                )
            ).all()
            runs = await conn.scalar(text("SELECT count(*) FROM runs"))
        expected_times = {armed - k * DAY for k in range(1, MISSED + 1)}
        for trigger_id in ids:
            times = [f.scheduled_for for f in fires if f.trigger_id == trigger_id]
            assert sorted(times) == sorted(expected_times), trigger_id
        assert {f.status for f in fires} == {"started"}
        assert runs == len({f.run_id for f in fires}) == SCHEDULES * MISSED
        # Both fire (the split differs from run to run); replays start nothing, uncounted.
        assert sum([await _started(server) for server in servers]) == SCHEDULES * MISSED
        for server in servers:
            assert "did not fire" not in server.log() and "a pass failed" not in server.log()
