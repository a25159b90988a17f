"""A plan_execute or hybrid run whose worker is killed (SIGKILL, at `after_tool_result`) in
the middle of a plan step resumes in that step: a fresh worker goes on with the step's next
turn (the call already made is not made again), then the next steps, as if nothing had
happened."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.connection import libpq_url
from tests.e2e.test_crash_points import _events, _fetch, _wait
from tests.support.chaos_tools import LEDGER_DDL
from tests.support.cluster import Cluster
from tests.support.factories import scripted_agent

pytestmark = pytest.mark.e2e

# The goals of each kind's plan (hybrid's has 3 to 7 steps); the first charges the card.
GOALS = {"plan_execute": ["pay", "report"], "hybrid": ["pay", "check", "report"]}


def _script(goals: list[str]) -> list[dict[str, Any]]:
    plan = {"steps": [{"goal": g, "acceptance_criteria": [f"{g}: done"]} for g in goals]}
    return [
        {"tool_calls": [{"name": "submit_plan", "input": plan}]},  # the planner
        {"tool_calls": [{"name": "charge_card", "input": {"amount": 5}}]},  # step 1: the crash
        *({"text": f"{g}: done"} for g in goals),  # each step's result, by the fresh worker
    ]


@pytest.mark.parametrize("kind", GOALS)
def test_a_crash_in_the_middle_of_a_step_resumes_in_that_step(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path, kind: str
) -> None:
    goals = GOALS[kind]
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
                _script(goals),
                tools=["charge_card"],
                auto_approve=["charge_card"],
                execution_loop=kind,
            )
            run = http.post("/v1/runs", json={"agent_id": agent["id"], "input": "pay"}).json()
            crash = {"LOOPWRIGHT_CRASH_AT": "after_tool_result"}
            doomed = cluster.worker("doomed", crash, await_ready=False)
            assert doomed.wait() == -9, "the crash point was not reached"
            crashed = http.get(f"/v1/runs/{run['id']}").json()
            cluster.worker("healthy")
            final = _wait(http, run["id"], {"completed", "failed"})
            events = _events(http, run["id"], until=None)

    # The crash left the plan in its first step, running.
    assert crashed["plan"]["current_step"] == 0
    assert crashed["plan"]["steps"][0]["status"] == "running"
    assert final["status"] == "completed", final
    assert final["result"] == f"{goals[-1]}: done"
    assert [(s["status"], s["result"]) for s in final["plan"]["steps"]] == [
        ("completed", f"{g}: done") for g in goals
    ]
    # The step was started once, before the crash, and went on after it.
    names = [name for name, _ in events]
    plan_moves = [(n, d.get("step")) for n, d in events if n.startswith("plan.")]
    per_step = ["plan.step.started", "plan.step.completed"]
    per_step += ["plan.checkpoint"] if kind == "hybrid" else []
    assert plan_moves == [
        ("plan.created", None),
        *((move, i) for i in range(len(goals)) for move in per_step),
    ]
    assert names.index("agent_run.timed_out") < names.index("plan.step.completed")
    assert names.index("plan.step.started") < names.index("agent_run.timed_out")
    effects = asyncio.run(_fetch(dsn, "SELECT count(*) AS n FROM chaos_ledger"))[0]["n"]
    assert effects == 1  # the card was charged once
