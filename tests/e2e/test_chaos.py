"""Chaos: runs mixing idempotent and side-effecting tools, executed by two real `loopwright
worker` processes that are SIGKILLed at random moments and restarted until every run
settles. No run is lost, every acknowledged run and event is still there, and each effect
(known by its run and its place in the script, not by the model's call id) is made exactly
once by a completed run and at most once by any run, although kills are shown to land
while side-effecting calls were under way."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.connection import libpq_url
from tests.support.chaos_tools import CALLS_DDL, LEDGER_DDL
from tests.support.cluster import Cluster
from tests.support.factories import scripted_agent
from tests.support.history import LEDGER_ROWS
from tests.support.processes import WorkerProcess

# Timing: random SIGKILLs against 2 s leases.
pytestmark = [pytest.mark.e2e, pytest.mark.alone]

RUNS = 120
MAX_KILLS = 12  # every other one aimed at a worker in the middle of a side-effecting call
SETTLE_TIMEOUT_S = 240  # from the workers' start; the test's own timeout is above it
TEST_TIMEOUT_S = SETTLE_TIMEOUT_S + 120  # start-up, the API calls and the checks
SCRIPT = [
    {"tool_calls": [{"name": "look_up", "input": {"q": "balance"}}], "latency_ms": 30},
    {
        "tool_calls": [{"name": "charge_card", "input": {"amount": 5, "effect": "charge-1"}}],
        "latency_ms": 30,
    },
    {"tool_calls": [{"name": "look_up", "input": {"q": "receipt"}}], "latency_ms": 30},
    {
        "tool_calls": [{"name": "charge_card", "input": {"amount": 7, "effect": "charge-3"}}],
        "latency_ms": 30,
    },
    {"text": "all charged", "latency_ms": 30},
]
EFFECTS = ["charge-1", "charge-3"]  # a run's effects, in the order its script makes them
SETTLED = ("completed", "waiting_on_human", "timed_out")


async def _sql(dsn: str, query: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(query, *args))
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


# The workers with a side-effecting call begun and not yet answered.
_BUSY = (
    f"SELECT DISTINCT k.pid FROM chaos_calls AS k JOIN {LEDGER_ROWS} AS c"
    " ON c.run_id = k.run_id AND c.tool_call_id = k.tool_call_id"
    " WHERE c.completed_at IS NULL AND k.began_at > clock_timestamp() - interval '1 second'"
)


def _busy(dsn: str, workers: list[WorkerProcess]) -> WorkerProcess | None:
    """One of `workers` found in the middle of a side-effecting call within two seconds."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        busy = {r["pid"] for r in asyncio.run(_sql(dsn, _BUSY))}
        found = [w for w in workers if w.process is not None and w.process.pid in busy]
        if found:
            return found[0]
    return None


def _histogram(runs: dict[str, dict[str, Any]]) -> dict[str, int]:
    return dict(Counter(r["status"] for r in runs.values()))


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_killed_workers_never_duplicate_a_side_effect_nor_lose_a_run(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    dsn = libpq_url(database_url)
    for ddl in (LEDGER_DDL, CALLS_DDL):
        asyncio.run(_sql(dsn, ddl))
    env = {
        "CHAOS_LEDGER_DSN": dsn,
        "LOOPWRIGHT_TOOLS__PLUGINS": '["tests.support.chaos_tools:tools"]',
        "LOOPWRIGHT_WORKERS__CAPACITY": "4",
        "LOOPWRIGHT_WORKERS__LEASE_TTL_S": "2",
        "LOOPWRIGHT_WORKERS__POLL_INTERVAL_S": "0.2",
        "LOOPWRIGHT_RECONCILER__INTERVAL_S": "1",
    }
    rng = random.Random(20261121)
    kills: list[tuple[int, datetime]] = []  # (pid killed, when)
    aimed = 0  # kills of a worker seen in the middle of a side-effecting call
    with Cluster(database_url, tmp_path, env) as cluster:
        api = cluster.server()
        with httpx.Client(base_url=api.url, timeout=30) as http:
            agent = scripted_agent(
                http,
                "cashier",
                SCRIPT,
                tools=["look_up", "charge_card"],
                auto_approve=["charge_card"],  # this test is about crashes
            )
            acknowledged = [
                http.post("/v1/runs", json={"agent_id": agent["id"], "input": f"pay {i}"})
                for i in range(RUNS)
            ]
            assert all(r.status_code == 202 for r in acknowledged)
            run_ids = {r.json()["id"] for r in acknowledged}
            workers = [cluster.worker(f"worker{i}") for i in range(2)]

            started = time.monotonic()
            deadline = started + SETTLE_TIMEOUT_S
            while True:
                runs = _statuses(http)
                if all(runs[i]["status"] in SETTLED for i in run_ids):
                    settle_s = time.monotonic() - started
                    break
                assert time.monotonic() < deadline, _histogram(runs)
                if len(kills) >= MAX_KILLS:  # the chaos is over: let the last runs settle
                    time.sleep(0.5)  # polling other processes' progress; nothing to inject
                    continue
                # Random moments: kill a worker that is up (one still booting holds no
                # run), bring it back at once (it rejoins when it has booted).
                time.sleep(rng.uniform(0.5, 2.0))  # the chaos schedule, not a synchronisation
                up = [w for w in workers if w.ready]
                if not up:
                    continue
                busy = _busy(dsn, up) if len(kills) % 2 == 0 else None
                aimed += busy is not None
                victim = busy or rng.choice(up)
                assert victim.process is not None
                pid = victim.process.pid
                victim.kill()
                kills.append((pid, datetime.now(UTC)))
                victim.spawn()

    assert len(kills) >= MAX_KILLS // 2, "the runs settled before the chaos could start"
    assert set(runs) >= run_ids  # every acknowledged run is still there
    by_status = {s: [runs[i] for i in run_ids if runs[i]["status"] == s] for s in SETTLED}

    # Each effect, known by its run and its place in the script, whatever the call's id.
    made: Counter[tuple[str, str]] = Counter(
        (r["run_id"], r["effect"])
        for r in asyncio.run(_sql(dsn, "SELECT run_id, effect FROM chaos_ledger"))
    )
    assert {k: n for k, n in made.items() if n > 1} == {}, "a side effect was executed twice"
    assert {run_id for run_id, _ in made} <= run_ids
    assert {effect for _, effect in made} <= set(EFFECTS)

    def effects(run_id: str) -> list[int]:
        return [made[(run_id, effect)] for effect in EFFECTS]

    for run in by_status["completed"]:  # each of its effects, exactly once
        assert run["result"] == "all charged"
        assert effects(run["id"]) == [1] * len(EFFECTS), run["id"]

    calls = {
        (r["run_id"], r["tool_call_id"]): r
        for r in asyncio.run(
            _sql(
                dsn,
                "SELECT c.run_id, c.tool_call_id, c.arguments, c.completed_at, k.pid, k.began_at "
                f"FROM {LEDGER_ROWS} AS c LEFT JOIN chaos_calls AS k "
                "ON k.run_id = c.run_id AND k.tool_call_id = c.tool_call_id "
                "WHERE c.tool = 'charge_card'",
            )
        )
    }
    killed = {pid for pid, _ in kills}
    for run in by_status["waiting_on_human"]:
        # Only a side-effecting call cut between its start and its result halts a run: the
        # effects before it were made once, it at most once, none after it.
        assert run["waiting_for"]["reason"] == "resume_unsafe", run["waiting_for"]
        call = calls[(run["id"], run["waiting_for"]["tool_call_id"])]
        assert call["completed_at"] is None
        assert call["pid"] is None or call["pid"] in killed  # it began in a killed worker
        cut = EFFECTS.index(json.loads(call["arguments"])["effect"])
        made_here = effects(run["id"])
        assert made_here[:cut] == [1] * cut and made_here[cut] <= 1, (run["id"], made_here)
        assert made_here[cut + 1 :] == [0] * (len(EFFECTS) - cut - 1), (run["id"], made_here)

    for run in by_status["timed_out"]:
        # Resumed automatically as often as allowed, then left for a person: whatever it
        # got to, its effects are a prefix of the script's, each made once.
        assert run["stop_reason"] == "heartbeat_lost", run["stop_reason"]
        assert run["resume_available"] and run["error_log"][-1]["resume"] == "exhausted"
        resumes = [e for e in run["error_log"] if e.get("resume") == "automatic"]
        assert len(resumes) == 2, run["error_log"]  # the default cap: requeued twice, no more
        made_here = effects(run["id"])
        done = made_here.count(1)
        assert made_here == [1] * done + [0] * (len(EFFECTS) - done), (run["id"], made_here)

    # Kills that landed while a side-effecting call of the killed worker was under way:
    # it had begun, and its result was not committed before the kill.
    def in_flight(pid: int, at: datetime, after_effect: bool) -> bool:
        return any(
            c["pid"] == pid
            and c["began_at"] <= at
            and (c["completed_at"] is None or c["completed_at"] > at)
            and (not after_effect or made[(c["run_id"], json.loads(c["arguments"])["effect"])])
            for c in calls.values()
        )

    during_calls = sum(in_flight(pid, at, after_effect=False) for pid, at in kills)
    after_effects = sum(in_flight(pid, at, after_effect=True) for pid, at in kills)
    assert during_calls >= 1, "no kill landed during a side-effecting call"

    gaps = asyncio.run(
        _sql(
            dsn,
            "SELECT run_id, count(*) AS n, max(seq) AS top FROM run_history "
            "GROUP BY run_id HAVING count(*) <> max(seq)",
        )
    )
    assert gaps == [], "a run's history (its event stream) lost a step"
    figures = {
        "runs": RUNS,
        "kills": len(kills),
        "aimed": aimed,
        "kills_during_side_effecting_calls": during_calls,
        "kills_after_an_effect_before_its_result": after_effects,
        **{status: len(settled) for status, settled in by_status.items()},
        "effects": sum(made.values()),
        "settled_in_s": round(settle_s, 1),
    }
    print(json.dumps(figures))
