"""Two `loopwright worker` processes and an API-only `serve` on one database: runs on one
lane never overlap and keep their order; runs on different lanes run side by side."""

from __future__ import annotations

import itertools
import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.cluster import Cluster
from tests.support.factories import scripted_agent

# Timing: lanes overlapping or not, seen in time.
pytestmark = [pytest.mark.e2e, pytest.mark.alone]

TURNS = [{"tool_calls": [{"name": "echo", "input": {"i": i}}], "latency_ms": 40} for i in range(4)]


def _wait_all(
    http: httpx.Client, run_ids: list[str], timeout_s: float = 90
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while True:
        runs = [http.get(f"/v1/runs/{run_id}").json() for run_id in run_ids]
        if all(r["status"] == "completed" for r in runs):
            return runs
        assert time.monotonic() < deadline, [r["status"] for r in runs]
        time.sleep(0.2)  # polling other processes' progress; nothing here to inject


def _span(run: dict[str, Any]) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(run["started_at"]), datetime.fromisoformat(run["finished_at"])


def _records(log_path: Path) -> list[dict[str, Any]]:
    """The JSON records of a process's log."""
    lines = log_path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    (a_start, a_end), (b_start, b_end) = _span(a), _span(b)
    return a_start < b_end and b_start < a_end


def test_two_worker_processes_share_lanes_without_overlap(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    env = {"LOOPWRIGHT_WORKERS__POLL_INTERVAL_S": "0.2"}
    with Cluster(database_url, tmp_path, env) as cluster:
        api = cluster.server()
        workers = [cluster.worker(f"worker{i}") for i in range(2)]
        with httpx.Client(base_url=api.url, timeout=10) as http:
            agent = scripted_agent(http, "steady", [*TURNS, {"text": "done"}], tools=["echo"])
            same_lane = [
                http.post(
                    "/v1/runs", json={"agent_id": agent["id"], "input": f"s{i}", "lane": "shared"}
                ).json()["id"]
                for i in range(5)
            ]
            other_lanes = [
                http.post("/v1/runs", json={"agent_id": agent["id"], "input": f"o{i}"}).json()["id"]
                for i in range(5)
            ]
            shared = _wait_all(http, same_lane)
            others = _wait_all(http, other_lanes)
    # Which worker ran a run is in that worker's log (clients never see a worker's name).
    ours = set(same_lane + other_lanes)
    owners = {
        record["worker"]
        for worker in workers
        for record in _records(worker.log_path)
        if record.get("event") == "agent_run.started" and record.get("run_id") in ours
    }

    for earlier, later in itertools.pairwise(shared):
        assert _span(earlier)[1] <= _span(later)[0], "a lane ran two runs at once"
    assert any(_overlap(a, b) for a in others for b in others if a is not b)
    assert len(owners) == 2, f"expected both worker processes to work, saw {owners}"
