"""What the local model servers share, whatever wire format they speak: a real uvicorn
server on a free loopback port, a queue of answers the test plans (one a request, in
order), the record of every request, and the faults that mean the same in every format."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from app.core.net import listening_socket

A = TypeVar("A")  # what a wire format answers with: its reply, its errors, a `Drop`
W = TypeVar("W", bound="WireServer[Any]")


@dataclass(frozen=True)
class Drop:
    """A stream that answers 200, starts with `partial_text`, then the connection is cut
    (or, if `clean`, closed as if the answer were whole, though the format's end of an
    answer never came)."""

    partial_text: str = ""
    clean: bool = False


@dataclass(frozen=True)
class Delay(Generic[A]):
    """Wait `seconds` before sending anything at all, then answer with `then`."""

    seconds: float
    then: A | Delay[A]


@dataclass(frozen=True)
class Received:
    body: dict[str, Any]
    headers: dict[str, str]  # lower-cased names


class _Dropped(Exception):
    """Raised inside a response that has started, which makes uvicorn cut the connection."""


class _HideDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, _Dropped)


class WireServer(ABC, Generic[A]):
    """`POST <path>`: each request takes the next planned answer, in order."""

    def __init__(self, path: str) -> None:
        self.url = ""
        self.requests: list[Received] = []
        self._plans: deque[A | Delay[A]] = deque()
        self._closing = asyncio.Event()
        self._ids = itertools.count(1)
        self.app = Starlette(routes=[Route(path, self._receive, methods=["POST"])])

    def plan(self, *plans: A | Delay[A]) -> None:
        self._plans.extend(plans)

    @abstractmethod
    def refusal(self, message: str) -> A:
        """A server error in this format, telling the test what it got wrong."""

    @abstractmethod
    def answer(self, plan: A, body: dict[str, Any], n: int) -> Response:
        """The response to the `n`th request (from 1), whose JSON body is `body`."""

    def stream(
        self,
        events: Iterable[str],
        headers: dict[str, str],
        *,
        pause_s: float = 0.0,
        cut: bool = False,
    ) -> StreamingResponse:
        """A 200 event stream of `events` (each its SSE text), `pause_s` apart; `cut`: the
        connection is then cut instead of closed."""
        body = self._paced(events, pause_s, cut)
        return StreamingResponse(body, media_type="text/event-stream", headers=headers)

    async def _receive(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(Received(body, dict(request.headers)))
        n = next(self._ids)
        plan = self._plans.popleft() if self._plans else self.refusal("no response was planned")
        while isinstance(plan, Delay):
            await self._sleep(plan.seconds)
            plan = plan.then
        return self.answer(plan, body, n)

    async def _paced(self, events: Iterable[str], pause_s: float, cut: bool) -> AsyncIterator[str]:
        for i, event in enumerate(events):
            if i and pause_s:
                await self._sleep(pause_s)
            yield event
        if cut:
            raise _Dropped

    async def _sleep(self, seconds: float) -> None:
        # Cut short at shutdown, so a client that gave up does not hold the server open.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)


def pieces(text: str, size: int) -> list[str]:
    """`text` in pieces of `size` characters; none for no text."""
    return [text[i : i + size] for i in range(0, len(text), size)]


@asynccontextmanager
async def serving(wire: W) -> AsyncIterator[W]:
    """`wire` behind a real uvicorn server on a free loopback port."""
    sock = listening_socket("127.0.0.1", 0)
    wire.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        wire.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    hide_drops = _HideDrops()
    logging.getLogger("uvicorn.error").addFilter(hide_drops)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError(f"the {type(wire).__name__} server stopped during start-up")
            await asyncio.sleep(0.01)
        yield wire
    finally:
        wire._closing.set()
        server.should_exit = True
        await task
        sock.close()
        logging.getLogger("uvicorn.error").removeFilter(hide_drops)
