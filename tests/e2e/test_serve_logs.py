"""The real `loopwright serve` process logs JSON lines, uvicorn's included, and each access
line names its request's `X-Request-ID`."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.processes import LOOPWRIGHT, ServerProcess, coverage_env, free_port

pytestmark = pytest.mark.e2e


def _lines(log_path: Path) -> list[dict[str, Any]]:
    """Every line of the log, each of which must be a JSON object."""
    lines = [line for line in log_path.read_text().splitlines() if line.strip()]
    assert lines
    parsed = []
    for line in lines:
        record = json.loads(line)  # a plain-text line fails here
        assert isinstance(record, dict) and {"ts", "level", "logger", "message"} <= set(record)
        parsed.append(record)
    return parsed


def test_serve_writes_json_logs_with_request_ids(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    log_path = tmp_path / "serve.log"
    server = ServerProcess({"DATABASE_URL": database_url}, log_path)
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            listed = http.get("/v1/tasks", headers={"X-Request-ID": "e2e-logs-1"})
            assert listed.headers["X-Request-ID"] == "e2e-logs-1"
            missing = http.get("/v1/tasks/task_missing")
            assert missing.status_code == 404
            generated = missing.headers["X-Request-ID"]
    finally:
        assert server.terminate(), server.log()

    records = _lines(log_path)
    access = {r.get("request_id"): r for r in records if r["logger"] == "uvicorn.access"}
    assert {k: access["e2e-logs-1"][k] for k in ("method", "path", "status")} == {
        "method": "GET",
        "path": "/v1/tasks",
        "status": 200,
    }
    assert access[generated]["path"] == "/v1/tasks/task_missing"
    assert access[generated]["status"] == 404
    assert generated.startswith("req_")
    messages = {(r["logger"], r["message"]) for r in records}
    assert ("uvicorn.error", "Application startup complete.") in messages
    assert ("uvicorn.error", "Application shutdown complete.") in messages


def test_on_a_terminal_serve_writes_plain_lines_and_says_where_to_go(
    database_url: str, clean_db: AsyncEngine
) -> None:
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DATABASE_URL": database_url,
        "LOOPWRIGHT_SERVER__PORT": str(port),
        **coverage_env(),
    }
    controller, terminal = os.openpty()
    process = subprocess.Popen(
        [LOOPWRIGHT, "serve"], env=env, stdin=terminal, stdout=terminal, stderr=terminal
    )
    os.close(terminal)
    try:
        seen = _read_until(controller, b"Application startup complete")
        process.send_signal(signal.SIGINT)
        seen += _read_until(controller, b"Application shutdown complete")
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)

    text = seen.decode()
    assert f"Loopwright is ready at http://127.0.0.1:{port}" in text
    assert f"dashboard  http://127.0.0.1:{port}/ui" in text
    assert f"API docs   http://127.0.0.1:{port}/docs" in text
    assert "LOOPWRIGHT_LLM__ANTHROPIC__API_KEY" in text  # how to use a real model
    assert not any(line.lstrip().startswith("{") for line in text.splitlines())  # not JSON
    assert "alembic" not in text  # routine start-up chatter stays out


def _read_until(fd: int, marker: bytes, timeout_s: float = 60.0) -> bytes:
    """What a terminal shows until `marker` appears."""
    seen = b""
    deadline = time.monotonic() + timeout_s
    while marker not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, seen.decode(errors="replace")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            seen += os.read(fd, 65536)
    return seen


def test_serve_names_at_start_up_the_agents_that_cannot_run_as_configured(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    """An agent on a provider without credentials is logged when the service starts, so an
    operator learns it before its first run fails."""
    log_path = tmp_path / "serve.log"
    server = ServerProcess({"DATABASE_URL": database_url}, log_path)
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            created = http.post(
                "/v1/agents",
                json={"name": "writer", "model": {"provider": "anthropic", "name": "claude"}},
            )
            assert created.status_code == 201, created.text
            agent = created.json()
            assert agent["warnings"], agent
            scripted = http.post(
                "/v1/agents",
                json={
                    "name": "echoer",
                    "model": {"provider": "scripted", "name": "s", "script": [{"text": "hi"}]},
                },
            )
            assert scripted.status_code == 201, scripted.text
    finally:
        assert server.terminate(), server.log()
    log_path.write_bytes(b"")

    server.start()
    assert server.terminate(), server.log()
    warned = [r for r in _lines(log_path) if r["level"] == "warning" and r.get("agent_id")]
    assert [r["agent_id"] for r in warned] == [agent["id"]]
    assert "writer" in warned[0]["message"]
    assert agent["warnings"][0] in warned[0]["message"]


def test_a_port_in_use_is_one_line_before_any_start(
    database_url: str, clean_db: AsyncEngine
) -> None:
    """Not a banner announcing a service that then fails to bind."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", "/tmp"),
            "DATABASE_URL": database_url,
            "LOOPWRIGHT_SERVER__PORT": str(port),
        }
        done = subprocess.run(
            [LOOPWRIGHT, "serve"], env=env, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "LOOPWRIGHT_SERVER__PORT" in done.stderr
    assert "is ready" not in done.stderr + done.stdout
