"""One MCP server as one run holds it: the process it started (stdio) or the session it
opened (HTTP), kept open by a task of its own.

The SDK's client lives in anyio task groups, which must be entered and left by one task and
which cancel that task when a background part of theirs fails. So the run's loop never
enters them: a connection's own task does, holds the client open until it is told to close,
and then leaves it (the SDK ends a stdio server as the spec says: stdin closed, then SIGTERM,
then SIGKILL to its process group, each wait bounded). The loop calls through the client
from its own task, each call bounded by a deadline. The task is never cancelled (a native
cancel can cut the SDK's shutdown short and leave the process alive): it is asked to close.

A stdio server's stderr goes to an unnamed temporary file, whose tail explains a server
that failed; it is gone when the connection closes.

This is the only module that speaks the SDK's types (and loads it, with httpx2): the loop
imports it when a run first starts a server, so a process whose agents have none never does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import IO, Any

import httpx2
import mcp_types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from app.runs.schemas.mcp import McpStdioServer
from app.runs.tools.mcp.adapt import ServerTool
from app.runs.tools.mcp.errors import ConnectionLost, McpUnavailable, ServerError
from app.runs.tools.mcp.pinned import AddressRefused, PinnedTransport
from app.runs.tools.mcp.policy import AnyServer, McpPolicy

log = logging.getLogger(__name__)

STDERR_TAIL_CHARS = 500
MAX_LIST_PAGES = 20
MAX_RESULT_CHARS = 100_000
SESSION_TERMINATED = "Session terminated"  # the SDK's error for an HTTP 404 within a session
# Set by the transport: a header of the agent's by these names is left out.
TRANSPORT_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "accept", "content-type"}
)
TRANSPORT_HEADERS_PREFIX = "mcp-"


class Connection:
    """A started server of one run; `client` answers calls until `close()`. It is in `live`
    (the process's hub's set) from its start until its task has ended, whoever ends it."""

    def __init__(self, server: AnyServer, policy: McpPolicy, live: set[Connection]) -> None:
        self.server = server
        self.policy = policy
        self._live = live
        self.client: Client | None = None
        self.lost = False  # it went away, timed out, or was closed: start another
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stderr: IO[str] | None = None
        self._http_status: int | None = None  # of the last answer that was an HTTP error

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.lost

    async def start(self) -> None:
        """Start the server and its handshake (`McpUnavailable` when it fails, or takes
        longer than the policy's start time)."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        name = f"mcp:{self.server.name}"
        self._live.add(self)
        self._task = asyncio.create_task(self._hold(), name=name)
        self._task.add_done_callback(lambda _: self._live.discard(self))
        try:
            async with asyncio.timeout(self.policy.start_timeout_s):
                await asyncio.shield(self._ready)
        except TimeoutError:
            await self.close()
            limit = f"{self.policy.start_timeout_s:g} s"
            raise self._unavailable(f"did not start within {limit}", retryable=True) from None
        except BaseException:  # its failure, or the caller's cancel: nothing is left running
            await self.close()
            raise

    async def list_tools(self) -> list[ServerTool]:
        """Every tool the server lists (`ConnectionLost`, `ServerError`)."""
        tools: list[ServerTool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            with self._translated():
                page = await self._client().list_tools(cursor=cursor)
            tools += [_server_tool(tool) for tool in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """The server's answer as the model reads it, and whether the server marked it an
        error (`ConnectionLost` when the server went away meanwhile, `ServerError`)."""
        with self._translated():
            result = await self._client().call_tool(tool, arguments)
        return _text(result), result.is_error

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except MCPError as exc:
            # Its process or connection is gone, or (HTTP) it forgot our session (it
            # restarted): either way another connection is needed.
            if exc.code == mcp_types.CONNECTION_CLOSED or exc.message == SESSION_TERMINATED:
                self.lost = True
                raise ConnectionLost(self.failure_detail()) from None
            raise ServerError(f"answered: {exc.message}") from None
        except (ValidationError, RuntimeError) as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
            raise ServerError(f"sent an unusable result: {first}") from None

    def failure_detail(self) -> str:
        """What the server said last on stderr (stdio), to explain a failure."""
        if not isinstance(self.server, McpStdioServer):
            return "its connection closed"
        tail = self._stderr_tail()
        return f"its last words on stderr: {tail}" if tail else "it said nothing on stderr"

    def close_soon(self) -> None:
        """Ask its task to close the connection (a stdio server is stopped); `close()`
        waits for it."""
        self.lost = True
        self._stop.set()

    async def close(self) -> None:
        self.close_soon()
        if self._task is not None:
            # Not cancelled: the SDK's bounded shutdown must run to its end.
            await asyncio.shield(self._task)
        if self._ready is not None and self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # a start's failure, told already (or to nobody)

    # -- the connection's own task ---------------------------------------------------

    async def _hold(self) -> None:
        assert self._ready is not None
        try:
            async with self._connected() as client:
                self.client = client
                self._ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(self._explained(exc))
            else:  # the server went away; a call found out, or will
                log.debug("MCP server %s closed: %r", self.server.name, exc)
        finally:
            self.client = None
            self.lost = True
            if self._stderr is not None:
                self._stderr.close()
            if not self._ready.done():
                self._ready.set_exception(self._unavailable("closed", retryable=True))

    @asynccontextmanager
    async def _connected(self) -> AsyncIterator[Client]:
        async with AsyncExitStack() as stack:
            transport: AbstractAsyncContextManager[Any]
            server = self.server
            if isinstance(server, McpStdioServer):
                if not self.policy.command_allowed(server.command):
                    raise self._unavailable(self.policy.problems(server)[0], retryable=False)
                env = self.policy.resolved(server.name, server.env)
                # Closed by `_hold` once a failure is explained, which reads its tail.
                self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
                params = StdioServerParameters(command=server.command, args=server.args, env=env)
                transport = stdio_client(params, errlog=self._stderr)
            else:
                headers = {
                    key: value
                    for key, value in self.policy.resolved(server.name, server.headers).items()
                    if key.lower() not in TRANSPORT_HEADERS
                    and not key.lower().startswith(TRANSPORT_HEADERS_PREFIX)
                }

                async def noted(response: httpx2.Response) -> None:
                    if response.status_code >= 400:
                        self._http_status = response.status_code

                http = httpx2.AsyncClient(
                    headers=headers,
                    transport=PinnedTransport(self.policy),
                    timeout=httpx2.Timeout(30.0, read=300.0),
                    trust_env=False,
                    event_hooks={"response": [noted]},
                )
                await stack.enter_async_context(http)
                transport = streamable_http_client(server.url, http_client=http)
            client = Client(transport, cache=None)
            yield await stack.enter_async_context(client)

    def _client(self) -> Client:
        if self.client is None:
            self.lost = True
            raise ConnectionLost(self.failure_detail())
        return self.client

    def _stderr_tail(self) -> str:
        """Read without moving the file's offset, which the server's process shares."""
        if self._stderr is None or self._stderr.closed:
            return ""
        with contextlib.suppress(OSError):
            fd = self._stderr.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - STDERR_TAIL_CHARS * 4)
            text = os.pread(fd, size - start, start).decode("utf-8", errors="replace")
            return " ".join(text.split())[-STDERR_TAIL_CHARS:]
        return ""

    def _unavailable(self, message: str, *, retryable: bool) -> McpUnavailable:
        return McpUnavailable(self.server.name, message, retryable=retryable)

    def _explained(self, exc: BaseException) -> McpUnavailable:
        """A start's failure, as the operator would want it told: what failed, whether
        waiting could help."""
        if isinstance(exc, McpUnavailable):
            return exc
        found = _find(exc, (McpUnavailable, AddressRefused, FileNotFoundError, PermissionError))
        if isinstance(found, McpUnavailable):
            return found
        if isinstance(found, AddressRefused):
            return self._unavailable(str(found), retryable=False)
        if isinstance(found, FileNotFoundError | PermissionError):
            command = getattr(self.server, "command", "")
            return self._unavailable(f"cannot run {command!r}: {found.strerror}", retryable=False)
        if (code := self._http_status) is not None:
            # 4xx: the URL or the headers are wrong (a 401: the credentials), not the moment.
            retryable = code >= 500 or code in (408, 429)
            return self._unavailable(f"answered HTTP {code}", retryable=retryable)
        leaf = _leaf(exc)
        detail = f"{type(leaf).__name__}: {leaf}"[:300]
        if isinstance(self.server, McpStdioServer):
            detail = f"{detail}; {self.failure_detail()}"
        return self._unavailable(f"could not start ({detail})", retryable=True)


def _server_tool(tool: mcp_types.Tool) -> ServerTool:
    hints = tool.annotations
    return ServerTool(
        name=tool.name,
        description=tool.description or tool.title,
        input_schema=tool.input_schema,
        read_only=hints.read_only_hint if hints else None,
        idempotent=hints.idempotent_hint if hints else None,
        destructive=hints.destructive_hint if hints else None,
    )


def _text(result: mcp_types.CallToolResult) -> str:
    """What the model reads: the text parts joined, the others summarised."""
    parts = [_part(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[… cut at {MAX_RESULT_CHARS:,} characters]"
    return text


def _part(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
        return f"[{kind}: {block.mime_type}, {len(block.data) * 3 // 4:,} bytes, not shown]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource link: {block.uri}]"
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        return f"[resource {resource.uri}: {resource.mime_type or 'binary'}, not shown]"
    return f"[{getattr(block, 'type', 'content')}: not shown]"


def _leaves(exc: BaseException) -> list[BaseException]:
    """Every exception inside `exc`: its groups' members, causes and contexts."""
    found: list[BaseException] = []
    stack: list[BaseException] = [exc]
    while stack and len(found) < 50:
        current = stack.pop()
        found.append(current)
        if isinstance(current, BaseExceptionGroup):
            stack += current.exceptions
        stack += [e for e in (current.__cause__, current.__context__) if e is not None]
    return found


def _find(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> BaseException | None:
    return next((e for e in _leaves(exc) if isinstance(e, kinds)), None)


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
