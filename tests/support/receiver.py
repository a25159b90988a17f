"""A real local HTTP server that receives webhook deliveries: it records each request
(headers, raw body) and answers from a plan the test gives (statuses, slow answers, held
answers), then 200 once the plan is used up."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.net import listening_socket

SAFETY_S = 20.0  # only reached when the code under test is broken: fail, do not hang


@dataclass(frozen=True)
class Answer:
    """One planned answer: `status` and `body`, sent after `delay_s`; a `hold` answers only
    once the test sets it (or the server stops)."""

    status: int = 200
    body: str = "ok"
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    hold: asyncio.Event | None = None


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed

    @property
    def delivery_id(self) -> str:
        return self.headers["loopwright-delivery"]

    def signed_by(self, secret: str) -> bool:
        """Verified as a receiver would, with nothing of Loopwright's code."""
        parts = dict(p.split("=", 1) for p in self.headers["loopwright-signature"].split(","))
        expected = hmac.new(
            secret.encode(), parts["t"].encode() + b"." + self.body, hashlib.sha256
        ).hexdigest()
        return hmac.compare_digest(expected, parts["v1"])


class Receiver:
    def __init__(self) -> None:
        self.url = ""
        self.received: list[Received] = []
        self._plan: deque[Answer] = deque()
        self._holds: list[asyncio.Event] = []
        self._arrived = asyncio.Condition()
        self.app = Starlette(routes=[Route("/{path:path}", self._receive, methods=["POST"])])

    def plan(self, *answers: Answer) -> None:
        self._plan.extend(answers)
        self._holds += [a.hold for a in answers if a.hold is not None]

    def hook(self, path: str = "hook") -> str:
        return f"{self.url}/{path}"

    async def _receive(self, request: Request) -> Response:
        body = await request.body()
        async with self._arrived:
            self.received.append(Received(request.url.path, dict(request.headers), body))
            self._arrived.notify_all()
        answer = self._plan.popleft() if self._plan else Answer()
        if answer.hold is not None:
            await answer.hold.wait()
        if answer.delay_s:
            await asyncio.sleep(answer.delay_s)  # the receiver is slow: real time
        return Response(answer.body, status_code=answer.status, headers=answer.headers)

    async def wait_for(self, count: int, timeout_s: float = SAFETY_S) -> list[Received]:
        """Once `count` requests have arrived (a real server's requests: waited for)."""
        async with asyncio.timeout(timeout_s), self._arrived:
            await self._arrived.wait_for(lambda: len(self.received) >= count)
        return list(self.received)


@asynccontextmanager
async def receiver() -> AsyncIterator[Receiver]:
    """A `Receiver` behind a real uvicorn server on a free loopback port."""
    found = Receiver()
    sock = listening_socket("127.0.0.1", 0)
    found.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(found.app, log_level="warning", lifespan="off")
    config.timeout_graceful_shutdown = 1
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if serving.done():
                serving.result()
                raise RuntimeError("the receiver stopped during start-up")
            await asyncio.sleep(0.01)
        yield found
    finally:
        for hold in found._holds:
            hold.set()
        server.should_exit = True
        await serving
        sock.close()
