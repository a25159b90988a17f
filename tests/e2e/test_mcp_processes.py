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

from tests.support.mcp_servers import PYTHON, alive, calls, started, stdio_server
from tests.support.processes import ServerProcess, WorkerProcess

pytestmark = pytest.mark.e2e


def _until(what: str, check: Any, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, f"waited {timeout_s} s for {what}"
        time.sleep(0.1)  # watching other processes; nothing to inject
    return found


def _agent(http: httpx.Client, log: Path, tool: str, **fields: Any) -> str:
    script = [{"tool_calls": [{"name": f"files__{tool}", "input": fields}]}, {"text": "done"}]
    agent = http.post(
        "/v1/agents",
        json={
            "name": "mcp",
            "mcp_servers": [stdio_server("files", log, timeout_s=600)],
            "auto_approve": [f"files__{tool}"],  # these tests are about processes
            "model": {"provider": "scripted", "name": "s", "script": script},
        },
    )
    assert agent.status_code == 201, agent.text
    run = http.post("/v1/runs", json={"agent_id": agent.json()["id"], "input": "go"})
    return str(run.json()["id"])


def _env(database_url: str) -> dict[str, str]:
    return {
        "DATABASE_URL": database_url,
        "LOOPWRIGHT_MCP__STDIO_COMMANDS": json.dumps([PYTHON]),
        "LOOPWRIGHT_WORKERS__POLL_INTERVAL_S": "0.2",
    }


def test_sigterm_during_a_call_stops_the_server(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    env = _env(database_url) | {"LOOPWRIGHT_WORKERS__GRACE_S": "1"}
    server = ServerProcess(env, tmp_path / "serve.log")
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            # `freeze` blocks the server's whole process: it would not notice its stdin
            # closing, so only the SDK's shutdown (SIGTERM, then SIGKILL) can end it.
            _agent(http, log, "freeze")
            _until("the call to start", lambda: calls(log, "freeze"))
            [pid] = started(log)
            assert alive(pid)
        assert server.terminate(), server.log()
    finally:
        server.terminate_and_wait()
    assert not alive(pid), "the MCP server outlived the process that started it"


def test_a_worker_killed_after_a_side_effect_leaves_no_server_and_no_second_call(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    env = _env(database_url) | {
        "LOOPWRIGHT_WORKERS__LEASE_TTL_S": "1",
        "LOOPWRIGHT_RECONCILER__INTERVAL_S": "0.5",
    }
    api = ServerProcess({**env, "LOOPWRIGHT_WORKERS__ENABLED": "false"}, tmp_path / "api.log")
    doomed = WorkerProcess({**env, "LOOPWRIGHT_CRASH_AT": "during_tool"}, tmp_path / "doomed.log")
    healthy = WorkerProcess(env, tmp_path / "healthy.log")
    api.start()
    try:
        with httpx.Client(base_url=api.url, timeout=30) as http:
            run_id = _agent(http, log, "append_line", line="charged")
            doomed.spawn()
            assert doomed.process is not None
            assert doomed.process.wait(timeout=60) == -9, "the crash point was not reached"
            [pid] = started(log)
            # Its stdin closed with the worker: it ends by itself.
            _until("the orphaned server to exit", lambda: not alive(pid), timeout_s=10)
            healthy.start()
            run = _until(
                "the run to halt",
                lambda: (
                    (r := http.get(f"/v1/runs/{run_id}").json())["status"] == "waiting_on_human"
                    and r
                ),
            )
    finally:
        doomed.terminate_and_wait()
        healthy.terminate_and_wait()
        api.terminate_and_wait()

    # The call ran, unrecorded: a person decides, nothing calls it again.
    assert run["waiting_for"]["reason"] == "resume_unsafe", run
    assert [c["arguments"] for c in calls(log, "append_line")] == [{"line": "charged"}]
    assert started(log) == [pid]  # the resumed run started no server for it
