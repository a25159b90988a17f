"""Crash-point sweep: a real worker process is killed (SIGKILL, by the test-only hook
`LOOPWRIGHT_CRASH_AT`) at each named boundary of a run that makes one side-effecting call;
a fresh worker then resumes it. What the user gets must match what the crash left."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.connection import libpq_url
from tests.support.chaos_tools import LEDGER_DDL
from tests.support.cluster import Cluster
from tests.support.factories import scripted_agent

pytestmark = pytest.mark.e2e

SCRIPT = [{"tool_calls": [{"name": "charge_card", "input": {"amount": 5}}]}, {"text": "paid"}]

# point -> (status after the resume, times the side effect ran)
OUTCOMES = {
    "after_claim": ("completed", 1),  # nothing done yet: started over
    "after_llm_response": ("waiting_on_human", 0),  # ledger says started: never re-run blind
    "during_tool": ("waiting_on_human", 1),  # it ran, unrecorded: a human decides
    "after_tool_result": ("completed", 1),  # replayed from the ledger
    "before_final": ("completed", 1),  # the last turn is asked again
}


async def _fetch(dsn: str, query: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


def _wait(http: httpx.Client, run_id: str, done: set[str], timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        run: dict[str, Any] = http.get(f"/v1/runs/{run_id}").json()
        if run["status"] in done:
            return run
        assert time.monotonic() < deadline, run["status"]
        time.sleep(0.1)  # watching other processes; nothing to inject


# The run's events as its stream tells them, around the crash: the reconciler times the run
# out and requeues it, and a fresh worker takes it from its last boundary.
_CALL = ["message.created", "message.created", "tool_call.started"]  # input, call, its start
_RESULT = ["message.created", "tool_call.completed"]  # the call's result
_CRASH = ["agent_run.timed_out", "agent_run.resume", "agent_run.started"]
_HALT = ["agent_run.resume_unsafe", "agent_run.waiting_on_human"]
_DONE = ["message.created", "agent_run.completed"]  # the final answer
_BEGUN = ["agent_run.queued", "agent_run.started"]
EVENTS = {
    "after_claim": ["agent_run.queued", *_CRASH, *_CALL, *_RESULT, *_DONE],
    "after_llm_response": [*_BEGUN, *_CALL, *_CRASH, *_HALT],
    "during_tool": [*_BEGUN, *_CALL, *_CRASH, *_HALT],
    "after_tool_result": [*_BEGUN, *_CALL, *_RESULT, *_CRASH, *_DONE],
    "before_final": [*_BEGUN, *_CALL, *_RESULT, *_CRASH, *_DONE],
}


def _events(
    http: httpx.Client, run_id: str, *, until: str | None, timeout_s: float = 30
) -> list[tuple[str, dict[str, Any]]]:
    """The run's events as a client reads them on its stream, (type, data) each, from the
    first through the first `until`, else to the end of the stream (a settled run's stream
    ends; the stream of a run waiting on a person stays open)."""
    events: list[tuple[str, dict[str, Any]]] = []
    name = None
    with http.stream("GET", f"/v1/runs/{run_id}/events", timeout=timeout_s) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("event:"):
                name = line.removeprefix("event:").strip()
            elif line.startswith("data:") and name is not None:
                events.append((name, json.loads(line.removeprefix("data:"))))
                if name == until:
                    return events
            elif line == "":
                name = None
    if until is None:
        return events
    raise AssertionError(f"the stream ended before {until}: {[e for e, _ in events]}")


@pytest.mark.parametrize("point", sorted(OUTCOMES))
def test_a_crash_at_each_boundary_resumes_to_the_right_outcome(
    point: str, database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    dsn = libpq_url(database_url)
    asyncio.run(_fetch(dsn, LEDGER_DDL))
    asyncio.run(_fetch(dsn, "TRUNCATE chaos_ledger"))
    env = {
        "CHAOS_LEDGER_DSN": dsn,
        "LOOPWRIGHT_TOOLS__PLUGINS": '["tests.support.chaos_tools:tools"]',
        "LOOPWRIGHT_WORKERS__LEASE_TTL_S": "1",
        "LOOPWRIGHT_WORKERS__POLL_INTERVAL_S": "0.2",
        "LOOPWRIGHT_RECONCILER__INTERVAL_S": "0.5",
    }
    with Cluster(database_url, tmp_path, env) as cluster:
        api = cluster.server()
        with httpx.Client(base_url=api.url, timeout=30) as http:
            agent = scripted_agent(
                http,
                "payer",
                SCRIPT,
                tools=["charge_card"],
                auto_approve=["charge_card"],  # this test is about crashes
            )
            run = http.post("/v1/runs", json={"agent_id": agent["id"], "input": "pay"}).json()
            # Spawned, not started: with the run already queued it may claim and die before
            # a readiness check could see it up.
            doomed = cluster.worker("doomed", {"LOOPWRIGHT_CRASH_AT": point}, await_ready=False)
            assert doomed.wait() == -9, "the crash point was not reached"
            cluster.worker("healthy")
            expected_status, expected_effects = OUTCOMES[point]
            final = _wait(http, run["id"], {expected_status})
            waited = http.get(f"/v1/runs/{run['id']}/wait", params={"timeout_s": 30}).json()
            halted = expected_status == "waiting_on_human"
            events = _events(http, run["id"], until=EVENTS[point][-1] if halted else None)

    # What a client waiting on the run, or following its stream, is told.
    assert waited["status"] == expected_status and waited["version"] == final["version"]
    assert [name for name, _ in events] == EVENTS[point]
    timed_out = next(data for name, data in events if name == "agent_run.timed_out")
    assert timed_out["status"] == "timed_out" and timed_out["resume_available"]
    assert events[-1][1]["status"] == expected_status
    if halted:
        (halt, _), (_, waiting) = events[-2:]
        assert halt == "agent_run.resume_unsafe"
        assert waiting["reason"] == "resume_unsafe", waiting
    effects = asyncio.run(_fetch(dsn, "SELECT count(*) AS n FROM chaos_ledger"))[0]["n"]
    assert effects == expected_effects
    if expected_status == "completed":
        assert final["result"] == "paid"
    else:
        assert final["waiting_for"]["reason"] == "resume_unsafe"
