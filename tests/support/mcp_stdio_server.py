"""A real MCP server for the tests, run as a subprocess over stdio (or, with `--http PORT`,
over streamable HTTP, checking a header): tools with and without annotations, one that
answers an error (`isError`), one that kills its own process, one that hangs, and a log of
the calls it ran (one JSON line each, with this process's id) in `MCP_TEST_LOG`, so tests
count executions and find the process. `MCP_TEST_VARIANT=b` lists other tools (a server
upgraded under a paused run).

    python tests/support/mcp_stdio_server.py            # stdio
    python tests/support/mcp_stdio_server.py --http 0   # HTTP on a free port (printed)
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from app.core.net import listening_socket

LOG = os.environ.get("MCP_TEST_LOG")
VARIANT = os.environ.get("MCP_TEST_VARIANT", "a")
READ_ONLY = ToolAnnotations(read_only_hint=True)

server = MCPServer("loopwright-test")


def record(tool: str, arguments: dict[str, Any]) -> None:
    if LOG:
        line = {"pid": os.getpid(), "tool": tool, "arguments": arguments, "variant": VARIANT}
        with Path(LOG).open("a") as log:
            log.write(json.dumps(line) + "\n")


@server.tool(annotations=READ_ONLY, description="Echo the text back.")
def echo(text: str) -> str:
    record("echo", {"text": text})
    return f"echo: {text}"


@server.tool(
    annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False),
    description="Set a value (the same call twice changes nothing more).",
)
def set_value(key: str, value: str) -> str:
    record("set_value", {"key": key, "value": value})
    return f"{key} = {value}"


@server.tool(description="Append a line to the ledger (no annotations: a side effect).")
def append_line(line: str) -> str:
    record("append_line", {"line": line})
    return f"appended {line!r}"


@server.tool(annotations=READ_ONLY, description="Fail the way a tool reports a failure.")
def refuse(reason: str = "no") -> str:
    record("refuse", {"reason": reason})
    raise ValueError(f"refused: {reason}")


@server.tool(annotations=READ_ONLY, description="Kill this server's process.")
def crash() -> str:
    record("crash", {})
    print("about to crash", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool(annotations=READ_ONLY, description="Kill this process the first time only.")
def crash_once() -> str:
    record("crash_once", {})
    marker = Path(os.environ["MCP_TEST_MARKER"])
    if not marker.exists():
        marker.touch()
        os._exit(3)
    return "recovered"


@server.tool(description="Never answer (no annotations: not retried).")
async def hang() -> str:
    record("hang", {})
    await anyio.sleep(3_600)
    return "woke up"


@server.tool(description="Block the whole process, stdin unread (not retried).")
def freeze() -> str:
    record("freeze", {})
    time.sleep(3_600)
    return "thawed"


if VARIANT == "b":
    server.remove_tool("append_line")

    @server.tool(annotations=READ_ONLY, description="Only in the second version.")
    def newer() -> str:
        return "newer"


def main() -> None:
    if LOG:
        record("started", {"argv": sys.argv[1:], "env": os.environ.get("MCP_TEST_SECRET")})
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        serve_http(int(sys.argv[2]))
    else:
        server.run("stdio")


def serve_http(port: int) -> None:
    """Streamable HTTP on 127.0.0.1; every request must carry `X-Test-Token: <MCP_TEST_TOKEN>`
    (401 otherwise). Prints `listening on <port>` once it accepts connections."""

    import uvicorn
    from starlette.types import ASGIApp, Receive, Scope, Send

    token = os.environ.get("MCP_TEST_TOKEN", "")
    app = server.streamable_http_app()

    def checked(inner: ASGIApp) -> ASGIApp:
        async def guard(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                headers = dict(scope["headers"])
                if headers.get(b"x-test-token", b"").decode() != token:
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b"no token"})
                    return
            await inner(scope, receive, send)

        return guard

    sock = listening_socket("127.0.0.1", port)  # connections wait for uvicorn to accept them
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(checked(app), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
