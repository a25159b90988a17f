"""What the benchmarks share: progress output, verdicts on their own checks, percentiles,
peak RSS, scratch databases, the server's CPU and WAL."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import socket
import sys
from collections.abc import Sequence

import asyncpg
import httpx
from sqlalchemy.engine import make_url

from app.db.connection import libpq_url


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


_bad_checks = 0


def verdict(ok: bool) -> str:
    """A check's mark in a report, `ok` or `BAD`. Every BAD is counted, so that
    `exit_on_bad_checks()` fails the run: figures from a run that failed its own checks (rows
    lost, an aim missed) must not pass `make bench` as if they could be trusted."""
    global _bad_checks
    if not ok:
        _bad_checks += 1
    return "ok" if ok else "BAD"


def aim_mark(ok: bool | None) -> str:
    """An aim's mark in a report: `met`, `MISSED`, or `n/a` (no figure to judge). Unlike
    `verdict`, a missed aim is not counted by `exit_on_bad_checks()`: for benchmarks whose
    aims are targets still being worked towards, whose figures are sound when missed."""
    if ok is None:
        return "n/a"
    return "met" if ok else "MISSED"


def exit_on_bad_checks() -> None:
    """Exit with status 1 if any check was BAD: the last call of a benchmark's `main`."""
    if _bad_checks:
        log(f"BAD checks: {_bad_checks}")
        sys.exit(1)


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kilobytes, macOS bytes.
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    rank = min(len(sorted_values) - 1, max(0, round(q * len(sorted_values)) - 1))
    return sorted_values[rank]


def with_database(server_url: str, name: str) -> str:
    return make_url(libpq_url(server_url)).set(database=name).render_as_string(hide_password=False)


async def admin(server_url: str, sql: str) -> None:
    conn = await asyncpg.connect(libpq_url(server_url))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


class ServerMeter:
    """CPU time of a local PostgreSQL server (the postmaster and every backend and helper
    process it started, live or exited) and the WAL it wrote, read before and after a timed
    section. CPU comes from /proc, so it is None for a server on another machine."""

    def __init__(self, url: str, postmaster: int | None) -> None:
        self._url = url
        self._postmaster = postmaster
        self._cpu: float | None = None
        self._lsn: str | None = None

    @property
    def postmaster(self) -> int | None:
        return self._postmaster

    @classmethod
    async def connect(cls, url: str) -> ServerMeter:
        conn = await asyncpg.connect(libpq_url(url))
        try:  # read while the backend lives
            return cls(url, _parent_pid(int(await conn.fetchval("SELECT pg_backend_pid()"))))
        finally:
            await conn.close()

    async def start(self) -> None:
        self._cpu = self._cpu_s()
        self._lsn = await self._wal_lsn()

    async def stop(self) -> tuple[float | None, float]:
        """CPU seconds and WAL bytes since `start()`."""
        cpu = self._cpu_s()
        conn = await asyncpg.connect(libpq_url(self._url))
        try:
            wal = float(
                await conn.fetchval(
                    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)", self._lsn
                )
            )
        finally:
            await conn.close()
        used = None if cpu is None or self._cpu is None else cpu - self._cpu
        return used, wal

    async def _wal_lsn(self) -> str:
        conn = await asyncpg.connect(libpq_url(self._url))
        try:
            return str(await conn.fetchval("SELECT pg_current_wal_lsn()::text"))
        finally:
            await conn.close()

    def _cpu_s(self) -> float | None:
        """The postmaster's own time, its exited children's (reaped into its cutime and
        cstime) and its live children's."""
        if self._postmaster is None:
            return None
        try:
            fields = _stat_fields(self._postmaster)
        except OSError:
            return None
        ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                child = _stat_fields(int(entry.name))
            except OSError:
                continue  # it exited while we looked
            if int(child[1]) == self._postmaster:
                ticks += int(child[11]) + int(child[12])
        return ticks / os.sysconf("SC_CLK_TCK")


# The server's processes that work for every database: what they do for one is counted
# with it (a WAL flush, a checkpoint), and so is what they do meanwhile for the others.
SHARED_HELPERS = ("walwriter", "checkpointer", "background writer")


class DatabaseCpu:
    """CPU time of the PostgreSQL processes of a local server working for one database: its
    backends and autovacuum workers (their process titles name it) and the server's shared
    writers, read from /proc (schedstat: nanoseconds) while they live. Other work on the
    server is left out, unlike `ServerMeter`. A backend that exits between `start()` and
    `stop()` takes its time along, unless `closing()` read it first: call it as the
    client closes a connection (a pool's overflow connections come and go), and read
    `stop()` before the pool closes the rest. None for a server on another machine."""

    def __init__(self, postmaster: int | None, database: str) -> None:
        self._postmaster = postmaster
        self._database = database
        self._start: dict[int, int] = {}
        self._closed: dict[int, int] = {}
        self._helpers: set[int] = set()

    def start(self) -> None:
        self._start = self._ns()
        self._closed = {}

    def closing(self, backend: int) -> None:
        """Read a backend whose connection is about to close."""
        used = _cpu_ns(backend)
        if used is not None:
            self._closed[backend] = used

    def stop(self) -> tuple[float | None, int, int]:
        """CPU seconds since `start()`; the database's own processes seen then, and those
        read as they closed."""
        if self._postmaster is None:
            return None, 0, 0
        end = self._ns()
        live = len(end.keys() - self._helpers)
        closed = len(self._closed.keys() - end.keys())
        end = self._closed | end
        used = sum(ns - self._start.get(pid, 0) for pid, ns in end.items())
        return used / 1e9, live, closed

    def _ns(self) -> dict[int, int]:
        if self._postmaster is None:
            return {}
        found: dict[int, int] = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                if int(_stat_fields(pid)[1]) != self._postmaster:
                    continue
                with open(f"/proc/{pid}/cmdline") as cmdline:
                    title = cmdline.read().replace("\0", " ")
            except OSError:
                continue  # it exited while we looked
            # "postgres: <cluster>: <user> <database> <host> <activity>", or the helper's name
            helper = title.rstrip().endswith(SHARED_HELPERS)
            used = _cpu_ns(pid) if helper or self._database in title.split() else None
            if used is not None:
                found[pid] = used
                if helper:
                    self._helpers.add(pid)
        return found


def _cpu_ns(pid: int) -> int | None:
    """The time a process has run, in nanoseconds (None: it has exited)."""
    try:
        with open(f"/proc/{pid}/schedstat") as schedstat:
            return int(schedstat.read().split()[0])
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat from the state field on (the name in parentheses may hold spaces),
    so index 1 is the parent pid and 11..14 are utime, stime, cutime and cstime."""
    with open(f"/proc/{pid}/stat") as stat:
        text = stat.read()
    return text[text.rindex(")") + 2 :].split()


def _parent_pid(backend: int) -> int | None:
    """The postmaster of a backend, if the backend is a PostgreSQL process of this machine."""
    try:
        with open(f"/proc/{backend}/comm") as comm:
            if comm.read().strip() != "postgres":
                return None  # a process of ours with the server's backend pid
        return int(_stat_fields(backend)[1])
    except OSError:
        return None


async def keep_session(connection: asyncpg.Connection) -> None:
    """An asyncpg pool `reset` that does nothing, for floors whose clients leave no session
    state behind: the default runs a reset query (RESET ALL, UNLISTEN, advisory unlocks) on
    every release."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_ready(base_url: str, server: asyncio.subprocess.Process) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=2) as http:
        for _ in range(300):
            if server.returncode is not None:
                raise RuntimeError("the server exited during start-up")
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get("/readyz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError("the server did not become ready")
