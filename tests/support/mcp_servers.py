"""The test MCP server (tests/support/mcp_stdio_server.py) as agents configure it, what it
recorded of its calls, and whether its processes are still alive."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

SERVER = str(Path(__file__).with_name("mcp_stdio_server.py"))
PYTHON = sys.executable


def stdio_server(name: str, log: Path, **fields: Any) -> dict[str, Any]:
    """A stdio server running the test server, recording to `log`; `env` is merged."""
    env = {"MCP_TEST_LOG": str(log), **fields.pop("env", {})}
    return {
        "name": name,
        "transport": "stdio",
        "command": PYTHON,
        "args": [SERVER],
        "env": env,
        **fields,
    }


def records(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def calls(log: Path, tool: str) -> list[dict[str, Any]]:
    """The calls of `tool` the server ran, in order."""
    return [r for r in records(log) if r["tool"] == tool]


def started(log: Path) -> list[int]:
    """The process ids of the server's starts, in order."""
    return [r["pid"] for r in records(log) if r["tool"] == "started"]


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, exited and not yet reaped, does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    state = next(line for line in status.splitlines() if line.startswith("State:"))
    return "zombie" not in state


@asynccontextmanager
async def http_server(token: str, log: Path) -> AsyncIterator[str]:
    """The test server over streamable HTTP in a process of its own, asking every request
    for `X-Test-Token: <token>`; yields its URL, and stops it afterwards."""
    process = await asyncio.create_subprocess_exec(
        PYTHON,
        SERVER,
        "--http",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "MCP_TEST_TOKEN": token, "MCP_TEST_LOG": str(log)},
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(30):
            line = (await process.stdout.readline()).decode()
        assert line.startswith("listening on "), line
        yield f"http://127.0.0.1:{int(line.split()[-1])}/mcp"
    finally:
        process.terminate()
        await process.wait()
