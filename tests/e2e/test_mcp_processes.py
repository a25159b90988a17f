"""An agent's stdio MCP server across the lives of real `loopwright` processes: a worker
stopped with SIGTERM in the middle of a call stops the server it started, even one that
ignores its stdin; a worker killed (SIGKILL) after a side-effecting call ran, before its
result was recorded, leaves no server behind either (a server ends when its stdin closes,
as MCP's stdio servers do), and the run resumed elsewhere does not call it again."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.cluster import Cluster
from tests.support.factories import scripted_agent
from tests.support.mcp_servers import PYTHON, alive, calls, started, stdio_server

pytestmark = pytest.mark.e2e

ENV = {
    "LOOPWRIGHT_MCP__STDIO_COMMANDS": json.dumps([PYTHON]),
    "LOOPWRIGHT_WORKERS__POLL_INTERVAL_S": "0.2",
}


def _until(what: str, check: Any, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, f"waited {timeout_s} s for {what}"
        time.sleep(0.1)  # watching other processes; nothing to inject
    return found


def _agent(http: httpx.Client, log: Path, tool: str, **fields: Any) -> str:
    script = [{"tool_calls": [{"name": f"files__{tool}", "input": fields}]}, {"text": "done"}]
    agent = scripted_agent(
        http,
        "mcp",
        script,
        mcp_servers=[stdio_server("files", log, timeout_s=600)],
        auto_approve=[f"files__{tool}"],  # these tests are about processes
    )
    run = http.post("/v1/runs", json={"agent_id": agent["id"], "input": "go"})
    return str(run.json()["id"])


def test_sigterm_during_a_call_stops_the_server(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    env = ENV | {"LOOPWRIGHT_WORKERS__GRACE_S": "1"}
    with Cluster(database_url, tmp_path, env) as cluster:
        server = cluster.server("serve", workers=True)
        with httpx.Client(base_url=server.url, timeout=30) as http:
            # `freeze` blocks the server's whole process: it would not notice its stdin
            # closing, so only the SDK's shutdown (SIGTERM, then SIGKILL) can end it.
            _agent(http, log, "freeze")
            _until("the call to start", lambda: calls(log, "freeze"))
            [pid] = started(log)
            assert alive(pid)
        assert server.terminate(), server.log()
    assert not alive(pid), "the MCP server outlived the process that started it"


def test_a_worker_killed_after_a_side_effect_leaves_no_server_and_no_second_call(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    env = ENV | {
        "LOOPWRIGHT_WORKERS__LEASE_TTL_S": "1",
        "LOOPWRIGHT_RECONCILER__INTERVAL_S": "0.5",
    }
    with Cluster(database_url, tmp_path, env) as cluster:
        api = cluster.server()
        with httpx.Client(base_url=api.url, timeout=30) as http:
            run_id = _agent(http, log, "append_line", line="charged")
            crash = {"LOOPWRIGHT_CRASH_AT": "during_tool"}
            doomed = cluster.worker("doomed", crash, await_ready=False)
            assert doomed.wait() == -9, "the crash point was not reached"
            [pid] = started(log)
            # Its stdin closed with the worker: it ends by itself.
            _until("the orphaned server to exit", lambda: not alive(pid), timeout_s=10)
            cluster.worker("healthy")
            run = _until(
                "the run to halt",
                lambda: (
                    (r := http.get(f"/v1/runs/{run_id}").json())["status"] == "waiting_on_human"
                    and r
                ),
            )

    # The call ran, unrecorded: a person decides, nothing calls it again.
    assert run["waiting_for"]["reason"] == "resume_unsafe", run
    assert [c["arguments"] for c in calls(log, "append_line")] == [{"line": "charged"}]
    assert started(log) == [pid]  # the resumed run started no server for it
