"""The http_request tool against real local HTTP servers on loopback: what it sends, what it
refuses before connecting, redirects, size and time limits, and how failures are classified.
No database is needed."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.core.net import listening_socket
from app.runs.tools.base import Tool, ToolContext, ToolFailure, idempotency_key
from app.runs.tools.http_request import HttpToolPolicy, make_http_request_tool

CTX = ToolContext(run_id="run-1", tool_call_id="call-1", agent_id="agent-1", conversation_id="c-1")
LOOPBACK = HttpToolPolicy(allowed_networks=("127.0.0.0/8", "::1/128"))


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class Server:
    """A test server: its base URL and port, every request it saw, and a gate for /slow."""

    url: str
    port: int
    seen: list[Seen] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)


def make_app(server: Server) -> Any:
    async def echo(request: Request) -> Response:
        body = (await request.body()).decode()
        return JSONResponse({"method": request.method, "body": body})

    async def redirect(request: Request) -> Response:
        return RedirectResponse(request.query_params["to"], status_code=302)

    async def keep_method(request: Request) -> Response:  # 307: method and body kept
        return RedirectResponse(request.query_params["to"], status_code=307)

    async def relative(request: Request) -> Response:
        return RedirectResponse("echo", status_code=302)

    async def loop(request: Request) -> Response:
        return RedirectResponse("/loop", status_code=302)

    async def big(request: Request) -> Response:
        return Response(b"x" * int(request.query_params["size"]), media_type="text/plain")

    async def slow(request: Request) -> Response:
        await server.release.wait()
        return Response("late")

    async def status(request: Request) -> Response:
        return Response("status", status_code=request.path_params["code"])

    app = Starlette(
        routes=[
            Route("/echo", echo, methods=["GET", "POST", "PUT"]),
            Route("/redirect", redirect),
            Route("/keep-method", keep_method, methods=["POST"]),
            Route("/relative", relative),
            Route("/loop", loop),
            Route("/big", big),
            Route("/slow", slow),
            Route("/status/{code:int}", status),
        ]
    )

    async def recording(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            server.seen.append(Seen(scope["method"], scope["path"], headers))
        await app(scope, receive, send)

    return recording


@asynccontextmanager
async def serving(host: str) -> AsyncIterator[Server]:
    """make_app behind uvicorn on a free port of `host`, in the test's event loop."""
    sock = listening_socket(host, 0)
    port = sock.getsockname()[1]
    server = Server(url=f"http://{host}:{port}", port=port)
    config = uvicorn.Config(make_app(server), log_level="warning", lifespan="off")
    uv = uvicorn.Server(config)
    task = asyncio.create_task(uv.serve(sockets=[sock]))
    while not uv.started:
        if task.done():
            task.result()
            raise RuntimeError("the test server stopped during start-up")
        await asyncio.sleep(0.01)
    try:
        yield server
    finally:
        server.release.set()  # a /slow handler still waiting must finish for shutdown
        uv.should_exit = True
        await task
        sock.close()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with serving("127.0.0.1") as running:
        yield running


@pytest.fixture
async def other_server() -> AsyncIterator[Server]:
    """A second server on 127.0.0.2: a redirect target that must never be reached."""
    async with serving("127.0.0.2") as running:
        yield running


async def call(tool: Tool, **arguments: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(await tool.handler(CTX, arguments))
    return result


async def failure(tool: Tool, **arguments: Any) -> ToolFailure:
    with pytest.raises(ToolFailure) as caught:
        await tool.handler(CTX, arguments)
    return caught.value


async def test_get_sends_the_idempotency_key_and_the_urls_host(server: Server) -> None:
    tool = make_http_request_tool(LOOPBACK)
    # localhost is resolved once and the connection goes to the checked address, while the
    # server still sees the name the URL gave.
    result = await call(tool, url=f"http://localhost:{server.port}/echo")

    assert result["status"] == 200
    assert json.loads(result["body"]) == {"method": "GET", "body": ""}
    assert result["truncated"] is False
    assert result["headers"]["content-type"] == "application/json"
    [seen] = server.seen
    assert seen.headers["idempotency-key"] == idempotency_key("run-1", "call-1")
    assert seen.headers["host"] == f"localhost:{server.port}"


async def test_post_sends_its_body_and_the_tool_owns_host_and_key(server: Server) -> None:
    tool = make_http_request_tool(LOOPBACK)
    headers = {"Host": "metadata.internal", "Idempotency-Key": "mine", "X-Trace": "t1"}
    result = await call(
        tool, url=f"{server.url}/echo", method="POST", headers=headers, body="héllo"
    )

    assert json.loads(result["body"]) == {"method": "POST", "body": "héllo"}
    [seen] = server.seen
    assert seen.headers["host"] == f"127.0.0.1:{server.port}"
    assert seen.headers["idempotency-key"] == CTX.idempotency_key
    assert seen.headers["x-trace"] == "t1"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:{port}/echo", "refusing to connect to 127.0.0.1: loopback address"),
        ("http://10.0.0.1/", "refusing to connect to 10.0.0.1: private address"),
        ("http://169.254.169.254/latest/meta-data", "169.254.169.254: link-local address"),
        ("http://[::ffff:127.0.0.1]:{port}/echo", "loopback address (IPv4-mapped 127.0.0.1)"),
        ("http://[64:ff9b::7f00:1]/", "loopback address (NAT64 127.0.0.1)"),
        ("http://localhost:{port}/echo", "loopback address"),
    ],
)
async def test_default_policy_refuses_before_connecting(
    server: Server, url: str, reason: str
) -> None:
    error = await failure(make_http_request_tool(), url=url.format(port=server.port))

    assert reason in error.message
    assert error.message.startswith("refusing to connect to ")
    assert error.transient is False
    assert server.seen == []


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/file", "only http, https allowed"),
        ("file:///etc/passwd", "only http, https allowed"),
        ("http://user:s3cret@example.com/", "carries credentials"),
        ("http:///no-host", "no host"),
        ("http://example.com:99999/", "bad port"),
    ],
)
async def test_bad_urls_are_refused_without_echoing_them(url: str, message: str) -> None:
    error = await failure(make_http_request_tool(), url=url)

    assert message in error.message
    assert "s3cret" not in error.message
    assert error.transient is False


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"url": "http://example.com/", "method": "TRACE"},
        {"url": "http://example.com/", "method": "get"},
        {"url": "http://example.com/", "headers": {"X-A": "one\r\nX-B: two"}},
        {"url": "http://example.com/", "headers": {"bad name": "v"}},
        {"url": "http://example.com/", "headers": {"a:b": "v"}},
        {"url": "http://example.com/", "headers": {"X-A": "caf\u00e9"}},
        {"url": "http://example.com/", "body": {"not": "a string"}},
        {"url": "http://example.com/", "follow": False},
    ],
)
async def test_malformed_arguments_are_refused(arguments: dict[str, Any]) -> None:
    error = await failure(make_http_request_tool(), **arguments)
    assert error.transient is False


@pytest.mark.parametrize("target", ["http://127.0.0.2:{other}/echo", "http://169.254.169.254/"])
async def test_a_redirect_to_a_forbidden_address_is_refused(
    server: Server, other_server: Server, target: str
) -> None:
    tool = make_http_request_tool(HttpToolPolicy(allowed_networks=("127.0.0.1/32",)))
    to = target.format(other=other_server.port)

    error = await failure(tool, url=f"{server.url}/redirect?to={to}")

    assert error.message.startswith("refusing to connect to ")
    assert error.transient is False
    assert [s.path for s in server.seen] == ["/redirect"]
    assert other_server.seen == []


async def test_a_relative_redirect_is_followed_and_rechecked(server: Server) -> None:
    result = await call(make_http_request_tool(LOOPBACK), url=f"{server.url}/relative")

    assert result["status"] == 200
    assert [s.path for s in server.seen] == ["/relative", "/echo"]
    assert {s.headers["idempotency-key"] for s in server.seen} == {CTX.idempotency_key}


async def test_too_many_redirects(server: Server) -> None:
    tool = make_http_request_tool(
        HttpToolPolicy(allowed_networks=("127.0.0.1/32",), max_redirects=2)
    )
    error = await failure(tool, url=f"{server.url}/loop")

    assert error.message == "too many redirects (more than 2)"
    assert error.transient is False
    assert [s.path for s in server.seen] == ["/loop"] * 3


@pytest.mark.parametrize(
    ("size", "expected", "truncated"),
    [(999, 999, False), (1000, 1000, False), (1001, 1000, True), (500_000, 1000, True)],
)
async def test_the_body_is_cut_at_max_response_bytes(
    server: Server, size: int, expected: int, truncated: bool
) -> None:
    policy = HttpToolPolicy(allowed_networks=("127.0.0.1/32",), max_response_bytes=1000)
    result = await call(make_http_request_tool(policy), url=f"{server.url}/big?size={size}")

    assert result["body"] == "x" * expected
    assert result["truncated"] is truncated
    assert result["headers"]["content-length"] == str(size)


async def test_a_slow_server_is_a_transient_timeout(server: Server) -> None:
    policy = HttpToolPolicy(allowed_networks=("127.0.0.1/32",), timeout_s=0.2)
    error = await failure(make_http_request_tool(policy), url=f"{server.url}/slow")

    assert "timed out" in error.message
    assert error.transient is True


async def test_a_refused_connection_is_transient() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago, with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = await failure(make_http_request_tool(LOOPBACK), url=f"http://127.0.0.1:{port}/")

    assert error.message.startswith("could not connect to 127.0.0.1")
    assert error.transient is True


@pytest.mark.parametrize("code", [429, 500, 503])
async def test_overload_and_server_errors_are_transient(server: Server, code: int) -> None:
    error = await failure(make_http_request_tool(LOOPBACK), url=f"{server.url}/status/{code}")

    assert str(code) in error.message
    assert error.transient is True


@pytest.mark.parametrize("code", [400, 404, 410])
async def test_other_client_errors_are_results(server: Server, code: int) -> None:
    result = await call(make_http_request_tool(LOOPBACK), url=f"{server.url}/status/{code}")

    assert result["status"] == code
    assert result["body"] == "status"


def test_idempotency_is_decided_per_call() -> None:
    tool = make_http_request_tool()
    url = "https://example.com/"

    assert tool.is_idempotent({"url": url}) is True
    for method in ("GET", "HEAD", "OPTIONS"):
        assert tool.is_idempotent({"url": url, "method": method}) is True
    for method in ("POST", "PUT", "PATCH", "DELETE", "get", "TRACE"):
        assert tool.is_idempotent({"url": url, "method": method}) is False
    assert tool.retries is True
    assert (tool.requires_permission, tool.fallback) == (True, None)
    # Destructive as it changes things: a GET asks nobody, a POST asks unless auto-approved.
    assert not tool.is_destructive({"url": url})
    assert tool.is_destructive({"url": url, "method": "POST"})
    assert tool.needs_approval({"url": url, "method": "POST"}, ())
    assert not tool.needs_approval({"url": url, "method": "POST"}, ("http_request",))


def test_a_change_to_a_host_that_honours_its_key_may_be_sent_again_yet_asks_approval() -> None:
    tool = make_http_request_tool(
        HttpToolPolicy(idempotency_key_hosts=("api.example.com", "pay.example.com:8443"))
    )
    post = {"method": "POST"}

    assert tool.may_send_again({"url": "https://api.example.com/charges", **post})
    assert tool.may_send_again({"url": "https://API.example.com:9000/x", "method": "DELETE"})
    assert tool.may_send_again({"url": "https://pay.example.com:8443/x", **post})
    assert not tool.may_send_again({"url": "https://pay.example.com/x", **post})  # port 443
    assert not tool.may_send_again({"url": "https://example.com/charges", **post})
    assert not tool.may_send_again({"url": "not a url", **post})
    # It still changes the world once: a person (or the agent's auto_approve) allows it.
    assert tool.needs_approval({"url": "https://api.example.com/charges", **post}, ())
    # Without the setting: never sent again (fail closed).
    assert not make_http_request_tool().may_send_again({"url": "https://api.example.com/", **post})


async def test_a_keyed_post_is_not_carried_by_a_redirect_to_a_host_that_ignores_keys(
    server: Server, other_server: Server
) -> None:
    policy = HttpToolPolicy(
        allowed_networks=("127.0.0.0/8",), idempotency_key_hosts=(f"127.0.0.1:{server.port}",)
    )
    tool = make_http_request_tool(policy)
    target = f"{other_server.url}/echo"
    arguments = {"url": f"{server.url}/keep-method?to={target}", "method": "POST", "body": "x"}
    assert tool.may_send_again(arguments)

    with pytest.raises(ToolFailure) as refused:
        await tool.handler(CTX, arguments)
    assert "Idempotency-Key" in refused.value.message and not refused.value.transient
    assert other_server.seen == []  # a re-send would have repeated the hop there
    # To a host that honours keys too, the same redirect is followed.
    same = {**arguments, "url": f"{server.url}/keep-method?to={server.url}/echo"}
    echoed = json.loads((await call(tool, **same))["body"])
    assert echoed == {"method": "POST", "body": "x"}
