"""SSE fan-out: N subscribers on one stream (the task stream) of a `loopwright serve`
process while events are appended at M events/s, one commit each, for a fixed time.

Reports commit-to-receipt latency (from the writer's commit returning to a subscriber
parsing the event's id) and reconnect-to-first-event latency: once during the run, at a
random moment, every subscriber drops its connection and opens a new one with the
`Last-Event-ID` it last saw; the figure runs from the new connect to its first event.
Events a subscriber gets replayed after such a reconnect count only in the second figure.

The server and the writer run in processes of their own, the subscribers in this one; the
server's CPU and the subscribers' are printed beside the figures, and the write rate
achieved beside the one asked for.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import multiprocessing
import os
import random
import re
import resource
import secrets
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from common import admin, free_port, log, percentile, wait_ready, with_database
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.streams import TASK_STREAM
from app.db import migrate
from app.db.connection import make_engine
from app.events import store as event_store

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
EVENT_PATH = "/v1/tasks/events"
_ID = re.compile(rb"(?:^|\n)id: (\d+)\r?\n")


@dataclass
class Tallies:
    commit_at: dict[int, float] = field(default_factory=dict)  # seq -> commit returned
    # (first seq, last seq, received at, connected at) per chunk read: judged at the end
    # (a commit may be recorded just after its event was received), so that reading stays
    # cheap enough not to be what is measured
    chunks: list[tuple[int, int, float, float]] = field(default_factory=list)
    reconnect_s: list[float] = field(default_factory=list)
    received: int = 0
    reconnects_without_event: int = 0


class Subscriber:
    def __init__(self, host: str, port: int, tallies: Tallies) -> None:
        self.host, self.port, self.tallies = host, port, tallies
        self.last_id: int | None = None

    async def run(self, stop: asyncio.Event, reconnect_at: float) -> None:
        loop = asyncio.get_running_loop()
        stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        resumed = False
        try:
            while not stop.is_set():
                started = time.monotonic()
                transport, connection = await loop.create_connection(
                    functools.partial(_Connection, self, started, resumed), self.host, self.port
                )
                head = "" if self.last_id is None else f"Last-Event-ID: {self.last_id}\r\n"
                transport.write(
                    f"GET {EVENT_PATH} HTTP/1.1\r\nHost: {self.host}\r\n{head}"
                    "Accept: text/event-stream\r\n\r\n".encode()
                )
                timeout = None if resumed else max(0.0, reconnect_at - time.monotonic())
                await asyncio.wait(
                    {connection.closed, stopping}, timeout=timeout, return_when="FIRST_COMPLETED"
                )
                transport.abort()
                if resumed and not connection.got_first:
                    self.tallies.reconnects_without_event += 1
                resumed = True
        finally:
            stopping.cancel()


class _Connection(asyncio.Protocol):
    """One stream connection; a protocol rather than a reader task, so that reading stays
    cheap enough not to be what is measured."""

    def __init__(self, subscriber: Subscriber, connected_at: float, resumed: bool) -> None:
        self.subscriber, self.connected_at, self.resumed = subscriber, connected_at, resumed
        self.tail = b""
        self.got_first = False
        self.closed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def data_received(self, chunk: bytes) -> None:
        now = time.monotonic()
        data = self.tail + chunk
        end = max(data.rfind(b"\n\n"), data.rfind(b"\r\n\r\n"))
        if end < 0:
            self.tail = data
            return
        complete, self.tail = data[: end + 2], data[end + 2 :]
        # A connection gets the stream's events in order without gaps, so a chunk is a
        # run of sequence numbers: its first and last id say which.
        first = _ID.search(complete)
        if first is None:
            return  # keep-alive comments only
        last_at = complete.rfind(b"\nid: ")
        last = _ID.search(complete, last_at) if last_at > first.start() else first
        assert last is not None
        first_seq, last_seq = int(first.group(1)), int(last.group(1))
        tallies = self.subscriber.tallies
        self.subscriber.last_id = last_seq
        tallies.received += last_seq - first_seq + 1
        if self.resumed and not self.got_first:
            tallies.reconnect_s.append(now - self.connected_at)
        tallies.chunks.append((first_seq, last_seq, now, self.connected_at))
        self.got_first = True


async def write_events(url: str, rate: float, duration_s: float) -> dict[int, float]:
    """One event per commit at `rate` per second; when each commit returned, by seq."""
    engine = make_engine(url)
    interval = 1.0 / rate
    due = time.monotonic()
    end = due + duration_s
    commit_at: dict[int, float] = {}
    try:
        async with AsyncSession(engine) as session:
            while due < end:
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                event = event_store.NewEvent("bench.tick", {"n": len(commit_at)})
                (seq,) = await event_store.append_events(
                    session, TASK_STREAM, [event], datetime.now(UTC)
                )
                await session.commit()
                commit_at[seq] = time.monotonic()
                due += interval
    finally:
        await engine.dispose()
    return commit_at


def _writer_process(url: str, rate: float, duration_s: float, out: Connection) -> None:
    """The writer runs in a process of its own, so that the subscribers' reading does not
    slow it below the asked rate (monotonic time is shared by the machine's processes)."""
    out.send(asyncio.run(write_events(url, rate, duration_s)))
    out.close()


async def run_writer(url: str, rate: float, duration_s: float) -> dict[int, float]:
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    writer = context.Process(target=_writer_process, args=(url, rate, duration_s, sending))
    writer.start()
    sending.close()
    try:
        ready = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_reader(receiving.fileno(), ready.set)
        try:
            await ready.wait()
        finally:
            loop.remove_reader(receiving.fileno())
        commit_at: dict[int, float] = receiving.recv()
    finally:
        await asyncio.to_thread(writer.join)
        receiving.close()
    return commit_at


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    name = f"lw_bench_sse_{secrets.token_hex(4)}"
    await admin(args.database_url, f'CREATE DATABASE "{name}"')
    url = with_database(args.database_url, name)
    engine = make_engine(url)
    server: asyncio.subprocess.Process | None = None
    try:
        await migrate.upgrade(engine)
        port = free_port()
        env = {
            **os.environ,
            "LOOPWRIGHT_DATABASE__URL": url,
            "LOOPWRIGHT_DATABASE__MIGRATE_ON_START": "false",
            "LOOPWRIGHT_WORKERS__ENABLED": "false",
            "LOOPWRIGHT_LOG_LEVEL": "WARNING",
        }
        command = [str(Path(sys.executable).with_name("loopwright")), "serve", "--port", str(port)]
        server = await asyncio.create_subprocess_exec(*command, env=env)
        await wait_ready(f"http://127.0.0.1:{port}", server)

        tallies = Tallies()
        stop = asyncio.Event()
        start = time.monotonic()
        # Every subscriber reconnects once, somewhere in the middle half of the run.
        subscribers = [Subscriber("127.0.0.1", port, tallies) for _ in range(args.subscribers)]
        tasks = [
            asyncio.create_task(
                s.run(stop, start + args.warmup_s + args.duration_s * random.uniform(0.25, 0.75))
            )
            for s in subscribers
        ]
        await asyncio.sleep(args.warmup_s)  # every subscriber connected and idle
        cpu_server, cpu_bench, wall = cpu_s(server.pid), own_cpu_s(), time.monotonic()
        tallies.commit_at = await run_writer(url, args.rate, args.duration_s)
        written = len(tallies.commit_at)
        writing_s = time.monotonic() - wall
        await asyncio.sleep(1.0)  # the last events arrive
        cpu_server = cpu_s(server.pid) - cpu_server
        cpu_bench = own_cpu_s() - cpu_bench
        wall = time.monotonic() - wall
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        if server is not None:
            server.terminate()
            try:
                await asyncio.wait_for(server.wait(), 20)
            except TimeoutError:
                server.kill()
                await server.wait()
        await engine.dispose()
        await admin(args.database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    receipts = sorted(
        max(0.0, received - tallies.commit_at[seq])
        for first, last, received, connected in tallies.chunks
        for seq in range(first, last + 1)
        if seq in tallies.commit_at and tallies.commit_at[seq] >= connected  # not replayed
    )
    reconnects = sorted(tallies.reconnect_s)
    return {
        "subscribers": args.subscribers,
        "rate_per_s": args.rate,
        "duration_s": args.duration_s,
        "events_written": written,
        "achieved_rate_per_s": round(written / writing_s, 1),
        "deliveries_expected": written * args.subscribers,
        "deliveries_received": tallies.received,
        "commit_to_receipt_ms": {
            "samples": len(receipts),
            "p50": round(percentile(receipts, 0.50) * 1000, 1),
            "p99": round(percentile(receipts, 0.99) * 1000, 1),
            "max": round(receipts[-1] * 1000, 1) if receipts else None,
        },
        "reconnect_to_first_event_ms": {
            "samples": len(reconnects),
            "p50": round(percentile(reconnects, 0.50) * 1000, 1),
            "p99": round(percentile(reconnects, 0.99) * 1000, 1),
            "max": round(reconnects[-1] * 1000, 1) if reconnects else None,
            "without_event": tallies.reconnects_without_event,
        },
        "cpu_s": {"server": round(cpu_server, 1), "subscribers": round(cpu_bench, 1)},
        "wall_s": round(wall, 1),
    }


def render(report: dict[str, Any]) -> str:
    receipt, reconnect = report["commit_to_receipt_ms"], report["reconnect_to_first_event_ms"]
    return "\n".join(
        [
            f"{report['subscribers']} subscribers, {report['rate_per_s']:g} events/s "
            f"for {report['duration_s']:g}s: {report['events_written']} events "
            f"(achieved {report['achieved_rate_per_s']:g}/s), "
            f"{report['deliveries_received']}/{report['deliveries_expected']} deliveries",
            f"commit-to-receipt     p50 {receipt['p50']:>8} ms  p99 {receipt['p99']:>8} ms  "
            f"max {receipt['max']} ms  ({receipt['samples']} samples)",
            f"reconnect-to-first    p50 {reconnect['p50']:>8} ms  p99 {reconnect['p99']:>8} ms  "
            f"max {reconnect['max']} ms  ({reconnect['samples']} samples, "
            f"{reconnect['without_event']} without an event)",
            f"CPU over {report['wall_s']}s: server {report['cpu_s']['server']}s, "
            f"subscribers {report['cpu_s']['subscribers']}s",
        ]
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_SERVER),
        help="a PostgreSQL server; a scratch database is created on it and dropped after",
    )
    parser.add_argument("--subscribers", type=int, default=200, help="N (default 200)")
    parser.add_argument("--rate", type=float, default=200.0, help="events/s (default 200)")
    parser.add_argument("--duration-s", type=float, default=20.0, help="writing time")
    parser.add_argument("--warmup-s", type=float, default=3.0, help="connecting time first")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    if args.subscribers < 1 or args.rate <= 0 or args.duration_s <= 0 or args.warmup_s < 0:
        parser.error("--subscribers ≥ 1, --rate > 0, --duration-s > 0, --warmup-s ≥ 0")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    log(f"sse fan-out: {args.subscribers} subscribers, {args.rate:g} events/s")
    report = asyncio.run(bench(args))
    print(json.dumps(report, indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
