"""The limits of SSE streams through a real server: a client that stops reading is dropped
within the send timeout, and past the cap on open streams a request gets 503
`too_many_streams` with Retry-After until a stream closes; /metrics counts both."""

from __future__ import annotations

import asyncio
import fcntl
import socket
import struct
import termios
import time
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.core.streams import TASK_STREAM
from app.events import store as event_store
from app.services import Services
from tests.support.server import make_settings, running_app
from tests.support.sse import SseReader

TCP_ESTABLISHED = 1  # tcpi_state, the first byte of Linux's struct tcp_info
SEND_TIMEOUT_S = 1.0
SLACK_S = 3.0
PAYLOAD = "x" * 32_000  # large events fill the kernel's buffers in a few writes


def _services(app: FastAPI) -> Services:
    services: Services = app.state.services
    return services


async def _until(condition: Callable[[], bool]) -> None:
    """Polls the server's state (the test shares its event loop; the caller's timeout
    bounds the wait)."""
    while not condition():  # noqa: ASYNC110 - a plain counter has no event to await
        await asyncio.sleep(0.01)


def _tcp_state(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


def _frozen_client(url: str) -> socket.socket:
    """Opens the task stream with a tiny receive buffer and never reads from it."""
    parts = urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((parts.hostname, parts.port))
    sock.sendall(
        f"GET /v1/tasks/events HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    return sock


async def _append(engine: AsyncEngine, count: int) -> None:
    async with AsyncSession(engine) as session:
        batch = [event_store.NewEvent("bench.filler", {"pad": PAYLOAD}) for _ in range(count)]
        await event_store.append_events(session, TASK_STREAM, batch, datetime.now(UTC))
        await session.commit()


async def test_a_client_that_stops_reading_is_dropped_within_the_send_timeout(
    database_url: str, clean_db: AsyncEngine
) -> None:
    settings = make_settings(
        database_url, streams={"send_timeout_s": SEND_TIMEOUT_S, "keepalive_s": 30.0}
    )
    async with running_app(settings) as (url, app), asyncio.timeout(60):
        slots = _services(app).stream_slots
        sock = _frozen_client(url)
        try:
            await _until(lambda: slots.open == 1)
            # Events keep coming until the server gives up on the client; the client
            # never reads, so its buffer and the server's fill and a write stalls.
            started = time.monotonic()
            unread = -1
            full_at: float | None = None
            while _tcp_state(sock) == TCP_ESTABLISHED:
                await _append(clean_db, 8)
                await asyncio.sleep(0.05)
                queued = _queued_bytes(sock)
                if queued == unread and full_at is None:
                    full_at = time.monotonic()
                unread = queued
                assert time.monotonic() - started < 30, "the server never let the client go"
            dropped_at = time.monotonic()
            assert full_at is not None
            assert dropped_at - full_at < SEND_TIMEOUT_S + SLACK_S
            await _until(lambda: slots.open == 0)  # given back as the response ends
        finally:
            sock.close()
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            metrics = (await http.get("/metrics")).text
        assert "loopwright_streams_dropped_total 1.0" in metrics
        assert "loopwright_streams_refused_total 0.0" in metrics


def _queued_bytes(sock: socket.socket) -> int:
    """Bytes received but not read (the client's receive queue)."""
    return int(struct.unpack("i", fcntl.ioctl(sock, termios.FIONREAD, b"\0\0\0\0"))[0])


async def test_past_the_cap_a_stream_request_gets_503_until_a_slot_frees(
    database_url: str, clean_db: AsyncEngine
) -> None:
    settings = make_settings(database_url, streams={"max_subscribers": 2, "full_retry_after_s": 7})
    async with (
        running_app(settings) as (url, app),
        httpx.AsyncClient(base_url=url, timeout=10) as http,
        asyncio.timeout(30),
    ):
        slots = _services(app).stream_slots
        async with http.stream("GET", "/v1/tasks/events"), http.stream("GET", "/v1/tasks/events"):
            await _until(lambda: slots.open == 2)
            refused = await http.get("/v1/tasks/events")
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "7"
            assert refused.headers["content-type"].startswith("application/problem+json")
            body = refused.json()
            assert body["code"] == "too_many_streams"
            assert body["status"] == 503 and body["limit"] == 2 and body["retry_after_s"] == 7
            assert slots.open == 2  # a refusal holds no slot
            await http.get("/v1/runs/events")  # each refusal counts, whichever stream
            metrics = (await http.get("/metrics")).text
            assert "loopwright_open_streams 2.0" in metrics
            assert "loopwright_streams_refused_total 2.0" in metrics
            assert "loopwright_streams_dropped_total 0.0" in metrics
        # Both clients left: their slots come back, and a new stream opens and streams.
        await _until(lambda: slots.open == 0)
        async with http.stream("GET", "/v1/tasks/events") as again:
            assert again.status_code == 200
            await _append(clean_db, 1)
            (event,) = await SseReader(again, published=False).take(1)
            assert event.event == "bench.filler"
            assert slots.open == 1


async def test_readers_sharing_a_stream_each_get_every_event_once_in_order(
    database_url: str, clean_db: AsyncEngine
) -> None:
    """A tail of 3 events: bursts longer than it, a reader that starts far behind (it reads
    the table itself), and live readers sharing the tail all see 1..n without gap or
    duplicate."""
    settings = make_settings(database_url, streams={"replay_batch": 3})
    async with (
        running_app(settings) as (url, app),
        httpx.AsyncClient(base_url=url, timeout=10) as http,
        asyncio.timeout(30),
    ):
        slots = _services(app).stream_slots
        await _append(clean_db, 2)
        async with (
            http.stream("GET", "/v1/tasks/events", headers={"Last-Event-ID": "0"}) as one,
            http.stream("GET", "/v1/tasks/events", headers={"Last-Event-ID": "0"}) as two,
            http.stream("GET", "/v1/tasks/events", headers={"Last-Event-ID": "2"}) as live,
        ):
            await _until(lambda: slots.open == 3)
            for burst in (1, 7, 2, 10):
                await _append(clean_db, burst)
            readers = [SseReader(r, published=False) for r in (one, two, live)]
            counts = (22, 22, 20)
            seen = [await reader.take(n) for reader, n in zip(readers, counts, strict=True)]
            await _append(clean_db, 1)
            after = [await reader.take(1) for reader in readers]
    assert [int(m.id or 0) for m in seen[0]] == list(range(1, 23))
    assert [int(m.id or 0) for m in seen[1]] == list(range(1, 23))
    assert [int(m.id or 0) for m in seen[2]] == list(range(3, 23))
    assert all(int(m.id or 0) == 23 for (m,) in after)
