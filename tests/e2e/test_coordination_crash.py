"""A coordinator killed in each phase: a real `loopwright serve` runs a coordination and is
killed (SIGKILL, by the test-only hook `LOOPWRIGHT_CRASH_AT`) after one phase's work and
before it is recorded; a fresh `serve` resumes the coordination at that phase. It ends as
an uninterrupted one would: each subtask made once and run once, one synthesis, every
phase recorded once, and the parent completed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.cluster import Cluster
from tests.support.factories import scripted_agent

pytestmark = pytest.mark.e2e

PLAN = {
    "subtasks": [
        {"key": "a", "title": "Revenue", "acceptance_criteria": ["revenue by month"]},
        {"title": "Costs", "acceptance_criteria": ["costs by month"]},
        {"title": "Margin", "acceptance_criteria": ["margin"], "depends_on": ["a", 1]},
    ]
}
POINTS = [
    "coordination_decomposed",
    "coordination_routed",
    "coordination_dispatched",
    "coordination_synthesis_created",
    "coordination_parent_updated",
]


def _settled(http: httpx.Client, coordination_id: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        found: dict[str, Any] = http.get(f"/v1/coordinations/{coordination_id}").json()
        if found["status"] != "running":
            return found
        assert time.monotonic() < deadline, found["phase"]
        time.sleep(0.1)  # watching other processes; nothing to inject


@pytest.mark.parametrize("point", POINTS)
def test_a_coordinator_killed_in_a_phase_resumes_there_without_duplicates(
    point: str, database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    env = {"LOOPWRIGHT_WORKERS__POLL_INTERVAL_S": "0.2"}
    with Cluster(database_url, tmp_path, env) as cluster:
        doomed = cluster.server("doomed", {"LOOPWRIGHT_CRASH_AT": point})
        cluster.worker()
        with httpx.Client(base_url=doomed.url, timeout=30) as http:
            for name in ("ann", "bob", "lead"):
                scripted_agent(http, name, [{"text": name}])
            decomposition = {"name": "submit_decomposition", "input": PLAN}
            scripted_agent(http, "planner", [{"tool_calls": [decomposition]}])
            parent = http.post(
                "/v1/tasks", json={"title": "Quarterly numbers", "task_structure": "parallel"}
            ).json()
            started = http.post(
                f"/v1/tasks/{parent['id']}/coordinate",
                json={
                    "options": {
                        "decomposer": "planner",
                        "orchestrator": "lead",
                        "auto_accept": True,
                    }
                },
            )
            assert started.status_code == 202, started.text
            coordination = started.json()
        assert doomed.wait() == -9, f"{point} was not reached:\n{doomed.log()}"
        healthy = cluster.server("healthy")
        with httpx.Client(base_url=healthy.url, timeout=30) as http:
            done = _settled(http, coordination["id"])
            assert (done["status"], done["outcome"]) == ("completed", "completed"), done
            phases = [r["phase"] for r in done["phase_results"]]
            assert phases == [
                "decompose",
                "route",
                "topology",
                "validate",
                "dispatch",
                "roll_up",
                "update_parent",
            ]
            tasks = http.get("/v1/tasks", params={"limit": 100}).json()["items"]
            children = [t for t in tasks if t["parent_task_id"] == parent["id"]]
            assert sorted(t["title"] for t in children) == ["Costs", "Margin", "Revenue"]
            assert all(t["status"] == "completed" for t in children)
            for child in children:
                runs = http.get("/v1/runs", params={"lane": f"task:{child['id']}"}).json()
                assert len(runs["items"]) == 1, (child["title"], runs["items"])
            synthesis = http.get("/v1/runs", params={"lane": f"task:{parent['id']}"}).json()
            assert [r["status"] for r in synthesis["items"]] == ["completed"]
            assert [r["run_id"] for r in done["runs"]] == [synthesis["items"][0]["id"]]
            assert http.get(f"/v1/tasks/{parent['id']}").json()["status"] == "completed"
