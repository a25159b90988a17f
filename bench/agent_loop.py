"""Workload W1: durable ReAct loops (scripted model, `echo` tool) through the run workers,
measured as turns/s, per-turn latency, and what a turn costs (Postgres commits, rows
written, WAL, Postgres's CPU and this process's), beside a floor of plain asyncpg inserts
with one commit per turn. Then the reads of a 1,000-turn conversation (its whole transcript,
pages of a run's history), and the CPU of an idle `loopwright serve`. The aims are printed
beside the figures: a missed aim is reported, while a failed check (runs lost or unfinished,
rows missing, reads returning too little) fails the script."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import json
import logging
import os
import pstats
import random
import resource
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
from common import (
    DatabaseCpu,
    ServerMeter,
    admin,
    aim_mark,
    exit_on_bad_checks,
    free_port,
    keep_session,
    log,
    peak_rss_mb,
    percentile,
    verdict,
    wait_ready,
    with_database,
)
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.agents.engine import AgentCommands
from app.agents.schemas import AgentCreate, Limits
from app.core.config import DatabaseSettings, LLMSettings, Settings, WorkerSettings
from app.core.model_config import ModelConfig, ScriptedToolCall, ScriptedTurn
from app.core.process import tune_gc
from app.core.states import RUN_SETTLED
from app.db import migrate
from app.db.connection import libpq_url, make_engine, make_sessionmaker
from app.events.engine.bus import EventBus
from app.llm import tokens
from app.llm.providers.registry import Providers
from app.runs.engine.runs import RunCommands
from app.runs.loop.boundary import RIDE_OUT, BoundaryWrite, write_boundaries
from app.runs.schemas.runs import RunCreate, RunRead
from app.runs.store import conversations, history
from app.runs.tools.base import Tool, ToolContext, define_tool
from app.runtime.group_commit import GroupCommitter
from app.telemetry import tracing
from app.wiring import build_tools, build_workers

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
# name=runs:turns:capacity[:latency_ms]
DEFAULT_SCENARIOS = "W1-1=200:10:1,W1-16=1000:10:16,W1-64=2000:10:64,W1-L=2000:5:500:50"
SINGLE, BASELINE, LATENCY = "W1-1", "W1-64", "W1-L"
POOL_CAP = 20
CREATE_CONCURRENCY = 16  # untimed setup; bounded so creates never wait out the pool timeout
POLL_S = 0.05  # the workers' poll interval (a run that ends wakes them sooner)
STALL_CHECK_S = 1.0
STALL_S = 120.0  # no run settled for this long: the scenario is declared stuck
STATS_SETTLE_S = 0.6  # exiting backends flush their pg_stat counters asynchronously
ECHO_NOTE = "x" * 72  # with the turn number, the echo result is ~100 bytes of JSON
# Turns take these idempotent echo tools in turn: one tool called every turn with new
# arguments is what the tool-loop detector (rightly) calls thrashing and stops.
ECHO_TOOLS = ("echo_a", "echo_b", "echo_c")
FLOOR_PAD = "y" * 960  # with the other keys, ~1 KB of JSONB per floor row
FLOOR_INSERT = "INSERT INTO bench_turns (run_id, turn, body) VALUES ($1, $2, $3::jsonb)"
# The conversation read back: 1,000 LLM turns, written by two W1 runs of 500 one after the
# other (an agent's max_iterations is at most 1,000).
READ_RUNS, READ_TURNS = 2, 500
READ_WARM_UP = 3
TRANSCRIPT_READS = 50
PAGE_READS = 200
PAGE_SIZE = 50
LOOPWRIGHT = str(Path(sys.executable).with_name("loopwright"))
IDLE_SETTLE_S = 3.0
IDLE_SAMPLE_S = 10.0
SERVE_STOP_S = 15.0

# The aims on the reference machine (2 cores). A missed aim is printed as MISSED; only the
# checks (runs lost or unfinished, rows missing) fail the script.
AIM_ROWS_PER_TURN = 3.0
AIM_WAL_KB_PER_TURN = 3.0
AIM_PG_CPU_MS_PER_TURN = 0.2
AIM_CPU_MS_PER_TURN = 0.4
AIM_W1_64_OVER_FLOOR = 0.2
AIM_W1_1_OVER_FLOOR = 0.15
AIM_W1_1_P50_MS = 2.0
AIM_W1_L_OVER_W1_64 = 0.9
AIM_TRANSCRIPT_MS = 50.0  # p50
AIM_PAGE_MS = 10.0  # p50
AIM_IDLE_CPU_PCT = 0.5

T = TypeVar("T")


@dataclass(frozen=True)
class Scenario:
    name: str
    runs: int
    turns: int
    capacity: int
    latency_ms: int = 0


@dataclass
class Row:
    kind: str  # "W1" or "floor"
    scenario: str
    runs: int
    turns: int
    capacity: int
    latency_ms: int
    wall_s: float
    turns_per_s: float
    runs_per_s: float | None
    p50_ms: float
    p99_ms: float
    commits_per_turn_pg: float | None
    commits_per_turn_proc: float | None
    # This process's CPU time per turn: steadier than turns/s when other work shares the
    # cores (Postgres is not in it).
    cpu_ms_per_turn: float
    # Of it, the time in the kernel (socket writes and reads, epoll), and the context
    # switches per turn (voluntary: waits; involuntary: preempted).
    sys_ms_per_turn: float
    switches_per_turn: float
    # PostgreSQL's CPU time per turn (None when the server is not on this machine): its
    # processes working for the scenario's database (`pg_cpu`), and the whole server's
    # (`server_cpu`: with whatever else it serves meanwhile). With the process's CPU, what
    # one turn costs the machine.
    pg_cpu_ms_per_turn: float | None
    server_cpu_ms_per_turn: float | None
    # The database's backends seen at the end of the timed section, those read as their
    # connection closed during it, and the connections made to the database meanwhile (the
    # meters' and readings' included): a backend that exited unread took its CPU time out
    # of `pg_cpu`.
    backends: int
    closed: int
    sessions: int
    wal_kb_per_turn: float
    # Tuples inserted, updated and deleted in the database's tables per turn, in all and
    # by table (pg_stat_user_tables).
    rows_per_turn: float
    rows_by_table: dict[str, float]
    peak_rss_mb: float
    problems: list[str] = field(default_factory=list)


async def scalar(url: str, sql: str) -> int:
    conn = await asyncpg.connect(libpq_url(url))
    try:
        return int(await conn.fetchval(sql))
    finally:
        await conn.close()


async def _echo(context: ToolContext, arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True)


def echo_tools() -> list[Tool]:
    return [
        define_tool(
            name,
            "Return the arguments it is given, as JSON.",
            {"type": "object"},
            _echo,
            idempotent=True,
            destructive=False,
            requires_permission=False,
        )
        for name in ECHO_TOOLS
    ]


def agent_body(scenario: Scenario) -> AgentCreate:
    """T-1 echo turns then a text answer, each after `latency_ms` of model time; each turn
    echoes a note of its own with the next of the echo tools, as an agent making progress
    would (repeated calls are what the loop guards stop)."""
    tool_turns = [
        ScriptedTurn(
            tool_calls=[
                ScriptedToolCall(
                    name=ECHO_TOOLS[i % len(ECHO_TOOLS)], input={"note": f"turn {i}: {ECHO_NOTE}"}
                )
            ],
            latency_ms=scenario.latency_ms,
        )
        for i in range(1, scenario.turns)
    ]
    final = ScriptedTurn(text="Done: every note was echoed.", latency_ms=scenario.latency_ms)
    return AgentCreate(
        name="bench-w1",
        tools=list(ECHO_TOOLS),
        model=ModelConfig(
            provider="scripted",
            name="scripted",
            script=[*tool_turns, final],
        ),
        # Room to spare, so the iteration limit never ends a run before its script does.
        limits=Limits(max_iterations=max(25, scenario.turns + 5)),
    )


async def create_runs(
    runs: RunCommands, agent_id: str, count: int, *, one_conversation: bool = False
) -> list[RunRead]:
    """`count` runs, each in a conversation of its own, or all in one (where they take
    the conversation's lane one after the other)."""
    if one_conversation:
        first, _ = await runs.create(RunCreate(agent_id=agent_id, input="bench run 0"))
        later = [
            RunCreate(agent_id=agent_id, conversation_id=first.conversation_id, input=f"run {i}")
            for i in range(1, count)
        ]
        return [first, *[(await runs.create(body))[0] for body in later]]
    gate = asyncio.Semaphore(CREATE_CONCURRENCY)

    async def one(i: int) -> RunRead:
        async with gate:
            run, _ = await runs.create(RunCreate(agent_id=agent_id, input=f"bench run {i}"))
            return run

    return list(await asyncio.gather(*(one(i) for i in range(count))))


@dataclass(frozen=True)
class DbStats:
    """The server's counters for one database: its commits, and the tuples inserted,
    updated and deleted in each of its user tables."""

    commits: int
    sessions: int  # connections made to the database
    rows: dict[str, int]

    def rows_since(self, before: DbStats) -> dict[str, int]:
        changed = {t: n - before.rows.get(t, 0) for t, n in self.rows.items()}
        return {t: n for t, n in changed.items() if n}


async def db_stats(url: str, database: str) -> DbStats:
    """The counters of `database`, read on a fresh connection after a pause: a backend
    flushes its counters when it exits (or up to seconds later while it idles), so callers
    close their connections first rather than rely on pg_stat_force_next_flush(), which
    only flushes the calling session."""
    await asyncio.sleep(STATS_SETTLE_S)
    conn = await asyncpg.connect(libpq_url(url))
    try:
        commits, sessions = await conn.fetchrow(
            "SELECT xact_commit, sessions FROM pg_stat_database WHERE datname = $1", database
        )
        tables = await conn.fetch(
            "SELECT schemaname || '.' || relname AS name, "
            "n_tup_ins + n_tup_upd + n_tup_del AS n FROM pg_stat_user_tables"
        )
    finally:
        await conn.close()
    return DbStats(int(commits), int(sessions), {str(t["name"]): int(t["n"]) for t in tables})


async def stats_baseline(url: str, database: str) -> tuple[DbStats, int]:
    """The counters before a timed section, and the commits one reading adds (the reading
    connection's own transactions, counted once it has exited; it changes no rows)."""
    first = await db_stats(url, database)
    second = await db_stats(url, database)
    return second, second.commits - first.commits


@dataclass(frozen=True)
class ProcessUsage:
    """This process's CPU time (user, system) and context switches, from getrusage."""

    user_s: float
    sys_s: float
    switches: int

    @classmethod
    def now(cls) -> ProcessUsage:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return cls(usage.ru_utime, usage.ru_stime, usage.ru_nvcsw + usage.ru_nivcsw)

    def __sub__(self, other: ProcessUsage) -> ProcessUsage:
        return ProcessUsage(
            self.user_s - other.user_s, self.sys_s - other.sys_s, self.switches - other.switches
        )

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s


class SettleCounter(GroupCommitter[BoundaryWrite, RunRead | None]):
    """The GroupCommitter, also counting the boundaries that settle a run, so the end of
    the timed section is seen in-process, without polling transactions of its own that
    would be counted as the system's commits."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], expected: int) -> None:
        super().__init__(sessionmaker, write_boundaries, ride_out=RIDE_OUT)
        self.expected = expected
        self.settled = 0
        self.all_settled = asyncio.Event()
        self.last_progress = time.monotonic()

    async def submit(self, item: BoundaryWrite) -> RunRead | None:
        result = await super().submit(item)
        if isinstance(result, RunRead) and result.status in RUN_SETTLED:
            self.settled += 1
            self.last_progress = time.monotonic()
            if self.settled >= self.expected:
                self.all_settled.set()
        return result

    async def wait_all_settled(self) -> None:
        self.last_progress = time.monotonic()
        while not self.all_settled.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.all_settled.wait(), STALL_CHECK_S)
            if time.monotonic() - self.last_progress > STALL_S:
                raise RuntimeError(
                    f"stuck: {self.settled}/{self.expected} runs settled, none for {STALL_S}s"
                )


async def turn_latencies(sa_engine: AsyncEngine) -> list[float]:
    """One turn = from the input step (or the previous turn's) to the turn's llm_response
    or final step; tool_result steps fall inside a turn. A step's `at` is the worker's
    clock when it made the boundary, just before its commit."""
    sql = text(
        """
        SELECT extract(epoch FROM at - lag(at) OVER w) AS turn_s
        FROM run_history
        WHERE kind IN ('input', 'llm_response', 'final')
        WINDOW w AS (PARTITION BY run_id ORDER BY seq)
        """
    )
    async with sa_engine.connect() as conn:
        rows = (await conn.execute(sql)).all()
    return sorted(float(r.turn_s) for r in rows if r.turn_s is not None)


async def verify(sa_engine: AsyncEngine, scenario: Scenario) -> list[str]:
    problems: list[str] = []
    async with sa_engine.connect() as conn:
        by_status = await conn.execute(text("SELECT status, count(*) FROM runs GROUP BY 1"))
        statuses = {str(status): int(n) for status, n in by_status}
        per_run = (
            await conn.execute(
                text(
                    "SELECT n, count(*) AS runs FROM (SELECT count(*) AS n FROM run_history "
                    "AS h CROSS JOIN LATERAL jsonb_array_elements(h.messages) AS m(message) "
                    "WHERE m.message ->> 'role' = 'assistant' GROUP BY h.run_id) AS a "
                    "GROUP BY n"
                )
            )
        ).all()
        failures = (
            await conn.execute(
                text(
                    "SELECT stop_reason, error->>'message' AS message, count(*) AS n FROM runs "
                    "WHERE status <> 'completed' GROUP BY 1, 2 ORDER BY n DESC LIMIT 5"
                )
            )
        ).all()
    if statuses.get("completed", 0) != scenario.runs:
        problems.append(f"run statuses {statuses}, expected {scenario.runs} completed")
        problems += [f"  {f.n} runs: {f.stop_reason}: {f.message}" for f in failures]
    histogram = {int(r.n): int(r.runs) for r in per_run}
    if histogram != {scenario.turns: scenario.runs}:
        problems.append(
            f"assistant messages per run {histogram}, expected {scenario.turns} for each run"
        )
    return problems


def profile_summary(profiler: cProfile.Profile, top: int) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats(pstats.SortKey.TIME).print_stats(top)
    stats.sort_stats(pstats.SortKey.CUMULATIVE).print_stats(top)
    return out.getvalue()


async def w1_scenario(
    url: str, database: str, scenario: Scenario, profile_top: int, *, one_conversation: bool = False
) -> Row:
    # Room for the committer, the claimer and the loops' short reads at start, without the
    # pool being the thing measured.
    sa_engine = make_engine(url, pool_size=min(scenario.capacity, POOL_CAP) + 5, pool_timeout_s=60)
    bus = EventBus()
    sessionmaker = make_sessionmaker(sa_engine)
    committer = SettleCounter(sessionmaker, scenario.runs)
    providers = Providers(LLMSettings())
    runs = RunCommands(sessionmaker, bus)
    settings = Settings(
        database=DatabaseSettings(url=url),
        workers=WorkerSettings(capacity=scenario.capacity, poll_interval_s=POLL_S),
    )
    tools = build_tools(settings, sessionmaker, echo_tools())
    pool = build_workers(settings, sessionmaker, bus, runs, providers, committer, tools)
    try:
        agent = await AgentCommands(sessionmaker).create(agent_body(scenario))
        log(f"  creating {scenario.runs} runs")
        await create_runs(runs, agent.id, scenario.runs, one_conversation=one_conversation)
        # Close every pooled connection so that their backends exit and flush their
        # counters before the baseline is read.
        await sa_engine.dispose()
        before, per_read = await stats_baseline(url, database)
        server = await ServerMeter.connect(url)
        await server.start()
        database_cpu = DatabaseCpu(server.postmaster, database)
        read_as_closed(sa_engine, database_cpu)
        database_cpu.start()

        tokens.encoding()  # loaded once per process (~0.3 s), as a server does at start-up
        log(f"  running {scenario.runs} runs x {scenario.turns} turns on {scenario.capacity}")
        profiler = cProfile.Profile() if profile_top else None
        committer.start()
        if profiler is not None:
            profiler.enable()
        started, usage = time.perf_counter(), ProcessUsage.now()
        pool.start()
        await committer.wait_all_settled()
        wall, used = time.perf_counter() - started, ProcessUsage.now() - usage
        pg_cpu, backends, closed = database_cpu.stop()  # before the pool closes the rest
        if profiler is not None:
            profiler.disable()
        proc_commits = committer.commits
        await pool.stop(grace_s=5)
        await committer.stop()
        await sa_engine.dispose()
        after = await db_stats(url, database)
        server_cpu, wal = await server.stop()

        latencies = await turn_latencies(sa_engine)
        problems = await verify(sa_engine, scenario)
        if profiler is not None:
            log(f"  cProfile of the timed section of {scenario.name}:")
            log(profile_summary(profiler, profile_top))
    finally:
        await pool.stop(grace_s=0)
        await committer.stop()
        await providers.aclose()
        await sa_engine.dispose()
    turns = scenario.runs * scenario.turns
    if len(latencies) != turns:
        problems.append(f"{len(latencies)} turn latencies from checkpoints, expected {turns}")
    for problem in problems:
        log(f"  PROBLEM: {problem}")
    return Row(
        kind="W1",
        scenario=scenario.name,
        runs=scenario.runs,
        turns=scenario.turns,
        capacity=scenario.capacity,
        latency_ms=scenario.latency_ms,
        wall_s=wall,
        turns_per_s=turns / wall,
        runs_per_s=scenario.runs / wall,
        p50_ms=percentile(latencies, 0.50) * 1000,
        p99_ms=percentile(latencies, 0.99) * 1000,
        commits_per_turn_pg=(after.commits - before.commits - per_read) / turns,
        commits_per_turn_proc=proc_commits / turns,
        cpu_ms_per_turn=used.cpu_s / turns * 1000,
        sys_ms_per_turn=used.sys_s / turns * 1000,
        switches_per_turn=used.switches / turns,
        pg_cpu_ms_per_turn=per_turn_ms(pg_cpu, turns),
        server_cpu_ms_per_turn=per_turn_ms(server_cpu, turns),
        backends=backends,
        closed=closed,
        sessions=after.sessions - before.sessions,
        wal_kb_per_turn=wal / turns / 1024,
        rows_per_turn=sum(after.rows_since(before).values()) / turns,
        rows_by_table={t: n / turns for t, n in sorted(after.rows_since(before).items())},
        peak_rss_mb=peak_rss_mb(),
        problems=problems,
    )


def read_as_closed(sa_engine: AsyncEngine, database_cpu: DatabaseCpu) -> None:
    """Read each backend of the engine's pool as its connection closes (an overflow
    connection returned to a full pool is closed), so its CPU time is counted."""

    def closing(dbapi_connection: Any, _record: Any) -> None:
        database_cpu.closing(dbapi_connection.driver_connection.get_server_pid())

    event.listen(sa_engine.sync_engine.pool, "close", closing)


def per_turn_ms(seconds: float | None, turns: int) -> float | None:
    return None if seconds is None else seconds / turns * 1000


async def floor_scenario(url: str, database: str, scenario: Scenario) -> Row:
    """C clients, each writing its runs' turns as one ~1 KB JSONB row and one commit each."""
    await admin(
        url,
        "CREATE TABLE IF NOT EXISTS bench_turns (id bigserial PRIMARY KEY, run_id text, "
        "turn int, body jsonb, created_at timestamptz DEFAULT now())",
    )
    before, per_read = await stats_baseline(url, database)
    server = await ServerMeter.connect(url)
    await server.start()
    database_cpu = DatabaseCpu(server.postmaster, database)
    database_cpu.start()
    size = min(scenario.capacity, POOL_CAP)
    # No reset query on release: the clients leave no session state behind, and asyncpg's
    # default reset would add a round trip and a transaction to every turn of the floor.
    pool = await asyncpg.create_pool(
        libpq_url(url), min_size=size, max_size=size, reset=keep_session
    )
    latencies: list[float] = []
    errors: list[BaseException] = []
    try:

        async def client(run_numbers: range) -> None:
            for r in run_numbers:
                run_id = f"floor_{r}"
                for turn in range(scenario.turns):
                    body = json.dumps({"run": run_id, "turn": turn, "pad": FLOOR_PAD})
                    begun = time.perf_counter()
                    try:
                        await pool.execute(FLOOR_INSERT, run_id, turn, body)
                    except Exception as exc:
                        errors.append(exc)
                        continue
                    latencies.append(time.perf_counter() - begun)

        started, usage = time.perf_counter(), ProcessUsage.now()
        await asyncio.gather(
            *(client(range(c, scenario.runs, scenario.capacity)) for c in range(scenario.capacity))
        )
        wall, used = time.perf_counter() - started, ProcessUsage.now() - usage
        pg_cpu, backends, closed = database_cpu.stop()
        await pool.close()
        after = await db_stats(url, database)
        server_cpu, wal = await server.stop()
        stored = await scalar(url, "SELECT count(*) FROM bench_turns")
    finally:
        await pool.close()
    turns = scenario.runs * scenario.turns
    problems = []
    if errors:
        problems.append(f"{len(errors)} inserts failed; first: {errors[0]!r}")
    if stored != turns:
        problems.append(f"{stored} rows stored, expected {turns}")
    for problem in problems:
        log(f"  PROBLEM: {problem}")
    latencies.sort()
    return Row(
        kind="floor",
        scenario=f"floor C={scenario.capacity}",
        runs=scenario.runs,
        turns=scenario.turns,
        capacity=scenario.capacity,
        latency_ms=0,
        wall_s=wall,
        turns_per_s=len(latencies) / wall,
        runs_per_s=None,
        p50_ms=percentile(latencies, 0.50) * 1000,
        p99_ms=percentile(latencies, 0.99) * 1000,
        commits_per_turn_pg=(after.commits - before.commits - per_read) / turns,
        commits_per_turn_proc=None,
        cpu_ms_per_turn=used.cpu_s / turns * 1000,
        sys_ms_per_turn=used.sys_s / turns * 1000,
        switches_per_turn=used.switches / turns,
        pg_cpu_ms_per_turn=per_turn_ms(pg_cpu, turns),
        server_cpu_ms_per_turn=per_turn_ms(server_cpu, turns),
        backends=backends,
        closed=closed,
        sessions=after.sessions - before.sessions,
        wal_kb_per_turn=wal / turns / 1024,
        rows_per_turn=sum(after.rows_since(before).values()) / turns,
        rows_by_table={t: n / turns for t, n in sorted(after.rows_since(before).items())},
        peak_rss_mb=peak_rss_mb(),
        problems=problems,
    )


@contextlib.asynccontextmanager
async def scratch_database(server_url: str) -> AsyncIterator[tuple[str, str]]:
    """A migrated database of its own (its name and URL), dropped whatever happens."""
    name = f"lw_bench_{secrets.token_hex(4)}"
    await admin(server_url, f'CREATE DATABASE "{name}"')
    url = with_database(server_url, name)
    try:
        sa_engine = make_engine(url, pool_size=1)
        try:
            await migrate.upgrade(sa_engine)
        finally:
            await sa_engine.dispose()
        yield name, url
    finally:
        await admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- reads of a long conversation ----------------------------------------------------------


@dataclass
class ReadTiming:
    what: str
    reads: int
    items: int  # messages or steps each read returned
    p50_ms: float
    p99_ms: float
    cpu_ms: float  # this process's CPU per read, mean (the rest is Postgres and waiting)
    aim_ms: float


@dataclass
class Reads:
    runs: int
    turns: int  # LLM turns in the conversation, all runs together
    messages: int
    build: Row  # the W1 runs that wrote the conversation, one after the other
    timings: list[ReadTiming]
    problems: list[str] = field(default_factory=list)


async def timed_reads(
    sessionmaker: async_sessionmaker[AsyncSession],
    what: str,
    count: int,
    expected: int,
    aim_ms: float,
    read: Callable[[AsyncSession, int], Awaitable[int]],
) -> tuple[ReadTiming, list[str]]:
    """`count` reads (after a few untimed ones), each in a session of its own as a request
    has, timed around the store call alone; each must return `expected` items."""
    problems: list[str] = []
    for i in range(READ_WARM_UP):
        async with sessionmaker() as session:
            await read(session, i)
    latencies: list[float] = []
    cpu = 0.0
    for i in range(count):
        async with sessionmaker() as session:
            begun, cpu_begun = time.perf_counter(), time.process_time()
            items = await read(session, i)
            latencies.append(time.perf_counter() - begun)
            cpu += time.process_time() - cpu_begun
        if items != expected and not problems:
            problems.append(f"{what}: read {items} items, expected {expected}")
    latencies.sort()
    timing = ReadTiming(
        what=what,
        reads=count,
        items=expected,
        p50_ms=percentile(latencies, 0.50) * 1000,
        p99_ms=percentile(latencies, 0.99) * 1000,
        cpu_ms=cpu / count * 1000,
        aim_ms=aim_ms,
    )
    return timing, problems


async def read_scenario(server_url: str, runs: int, turns: int) -> Reads:
    """A conversation of runs x turns LLM turns written by W1 runs (one after the other,
    through the workers, as any W1 scenario), then: its whole transcript read as the
    messages endpoint reads it (`history.read_messages`) and as a run's loop does
    (`conversations.read_context`), and pages of one run's steps (`history.steps`), as the
    history and stream endpoints read them."""
    async with scratch_database(server_url) as (name, url):
        scenario = Scenario("W1-conv", runs, turns, 1)
        log(f"reads: a conversation of {runs} runs x {turns} turns")
        build = await w1_scenario(url, name, scenario, 0, one_conversation=True)
        sa_engine = make_engine(url, pool_size=2)
        try:
            async with sa_engine.begin() as conn:
                # As autovacuum would have, on a table that has grown this much.
                await conn.execute(text("ANALYZE"))
                conversation_id = str(
                    await conn.scalar(text("SELECT min(conversation_id) FROM runs"))
                )
                run_id, last_seq = (
                    await conn.execute(
                        text(
                            "SELECT run_id, max(seq) FROM run_history GROUP BY run_id "
                            "ORDER BY 1 LIMIT 1"
                        )
                    )
                ).one()
            sessionmaker = make_sessionmaker(sa_engine)
            messages = runs * 2 * turns  # each turn's response and its tool result or input
            pages = random.Random(14)

            async def transcript(session: AsyncSession, _: int) -> int:
                found = await history.read_messages(session, conversation_id, limit=10 * messages)
                return len(found)

            async def context(session: AsyncSession, _: int) -> int:
                live, _through = await conversations.read_context(session, conversation_id)
                return len(live)

            async def page(session: AsyncSession, _: int) -> int:
                after = pages.randrange(0, last_seq - PAGE_SIZE + 1)
                return len(await history.steps(session, run_id, after=after, limit=PAGE_SIZE))

            timings, problems = [], list(build.problems)
            for what, count, expected, aim_ms, read in (
                (
                    "transcript: history.read_messages",
                    TRANSCRIPT_READS,
                    messages,
                    AIM_TRANSCRIPT_MS,
                    transcript,
                ),
                (
                    "transcript: conversations.read_context",
                    TRANSCRIPT_READS,
                    messages,
                    AIM_TRANSCRIPT_MS,
                    context,
                ),
                (
                    f"page of {PAGE_SIZE} steps: history.steps",
                    PAGE_READS,
                    PAGE_SIZE,
                    AIM_PAGE_MS,
                    page,
                ),
            ):
                log(f"  {count} reads: {what}")
                timing, found = await timed_reads(sessionmaker, what, count, expected, aim_ms, read)
                timings.append(timing)
                problems += found
        finally:
            await sa_engine.dispose()
    for problem in problems:
        log(f"  PROBLEM: {problem}")
    return Reads(runs, runs * turns, messages, build, timings, problems)


# -- an idle server --------------------------------------------------------------------


@dataclass
class Idle:
    seconds: float
    cpu_pct: float  # the server process's CPU, in % of one core
    pg_cpu_pct: float | None  # PostgreSQL's for its database (its backends, the writers)
    server_cpu_pct: float | None  # the whole PostgreSQL server's, whatever else it serves
    problems: list[str] = field(default_factory=list)


async def idle_serve(server_url: str) -> Idle:
    """`loopwright serve` with the default settings on a database of its own, left alone
    once it is ready: its CPU over IDLE_SAMPLE_S (its workers' polls, the periodic jobs,
    the stream listener), after IDLE_SETTLE_S for start-up to finish."""
    async with scratch_database(server_url) as (name, url):
        port = free_port()
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "LOOPWRIGHT_LOG_FORMAT": "json",
            "LOOPWRIGHT_LOG_LEVEL": "WARNING",
        }
        log(f"idle serve: {IDLE_SETTLE_S:g} s to settle, then {IDLE_SAMPLE_S:g} s sampled")
        with tempfile.TemporaryFile() as errors:
            server = await asyncio.create_subprocess_exec(
                LOOPWRIGHT, "serve", "--port", str(port), env=env, stdout=errors, stderr=errors
            )
            try:
                await wait_ready(f"http://127.0.0.1:{port}", server)
                await asyncio.sleep(IDLE_SETTLE_S)
                meter = await ServerMeter.connect(url)
                await meter.start()
                database_cpu = DatabaseCpu(meter.postmaster, name)
                database_cpu.start()
                begun, cpu_begun = time.perf_counter(), process_cpu_s(server.pid)
                await asyncio.sleep(IDLE_SAMPLE_S)
                seconds, cpu = time.perf_counter() - begun, process_cpu_s(server.pid) - cpu_begun
                pg_cpu, _backends, _closed = database_cpu.stop()
                server_cpu, _wal = await meter.stop()
                problems = [] if server.returncode is None else ["the server exited while idle"]
            finally:
                if server.returncode is None:
                    server.send_signal(signal.SIGTERM)
                    try:
                        await asyncio.wait_for(server.wait(), SERVE_STOP_S)
                    except TimeoutError:
                        server.kill()
                        await server.wait()
            if server.returncode not in (0, -signal.SIGTERM):
                errors.seek(0)
                problems.append(f"serve exited {server.returncode}: {errors.read()[-2000:]!r}")
    for problem in problems:
        log(f"  PROBLEM: {problem}")
    return Idle(
        seconds=seconds,
        cpu_pct=cpu / seconds * 100,
        pg_cpu_pct=None if pg_cpu is None else pg_cpu / seconds * 100,
        server_cpu_pct=None if server_cpu is None else server_cpu / seconds * 100,
        problems=problems,
    )


def process_cpu_s(pid: int) -> float:
    """User and system time of a live process and its reaped children, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


async def scenario_rows(
    server_url: str, scenario: Scenario, *, floor: bool, profile_top: int
) -> list[Row]:
    """W1 and then its floor, in a scratch database of their own."""
    async with scratch_database(server_url) as (name, url):
        log(f"{scenario.name}: R={scenario.runs} T={scenario.turns} C={scenario.capacity}")
        rows = [await w1_scenario(url, name, scenario, profile_top)]
        if floor:
            log(f"floor C={scenario.capacity}: {scenario.runs * scenario.turns} turns")
            rows.append(await floor_scenario(url, name, scenario))
        for row in rows:
            log(
                f"  {row.scenario}: {row.backends} backends of the database at the end, "
                f"{row.closed} read as they closed, {row.sessions} connections made to it "
                "(the meters' and readings' included); process CPU/turn "
                f"{row.cpu_ms_per_turn:.3f} ms, of which system {row.sys_ms_per_turn:.3f} ms, "
                f"{row.switches_per_turn:.2f} context switches/turn"
            )
        return rows


@dataclass
class Report:
    rows: list[Row]
    reads: Reads | None
    idle: Idle | None


async def bench(
    server_url: str,
    scenarios: Sequence[Scenario],
    *,
    floor: bool,
    reads: bool,
    idle: bool,
    profile: set[str],
    top: int,
) -> Report:
    rows: list[Row] = []
    for scenario in scenarios:
        profile_top = top if scenario.name in profile else 0
        rows += await scenario_rows(server_url, scenario, floor=floor, profile_top=profile_top)
    return Report(
        rows,
        await read_scenario(server_url, READ_RUNS, READ_TURNS) if reads else None,
        await idle_serve(server_url) if idle else None,
    )


def find(rows: Sequence[Row], kind: str, name: str) -> Row | None:
    return next((r for r in rows if r.kind == kind and r.scenario == name), None)


def floor_of(rows: Sequence[Row], row: Row | None) -> Row | None:
    return find(rows, "floor", f"floor C={row.capacity}") if row else None


def ratio(a: Row | None, b: Row | None) -> float | None:
    if a is None or b is None or b.turns_per_s == 0:
        return None
    return a.turns_per_s / b.turns_per_s


@dataclass
class Aim:
    """An aim and each figure judged by it: (what, the figure, met: None when unknown)."""

    aim: str
    figures: list[tuple[str, str, bool | None]]


def num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def at_most(value: float | None, aim: float) -> bool | None:
    return None if value is None else value <= aim


def at_least(value: float | None, aim: float) -> bool | None:
    return None if value is None else value >= aim


def aims(report: Report) -> list[Aim]:
    """Every aim, with the figures of this run it judges."""
    rows = report.rows
    w1 = [r for r in rows if r.kind == "W1"]

    def per_turn(what: str, limit: float, value: Callable[[Row], float | None]) -> Aim:
        figures = [(r.scenario, num(value(r), ".2f"), at_most(value(r), limit)) for r in w1]
        return Aim(f"{what} <= {limit:g}", figures)

    def over(a: Row | None, b: Row | None, limit: float, names: tuple[str, str]) -> Aim:
        """a's turns/s over b's: the ratio, and the two figures (`names`: theirs if absent)."""
        names = (a.scenario if a else names[0], b.scenario if b else names[1])
        value = ratio(a, b)
        figure = f"({a.turns_per_s:.0f} / {b.turns_per_s:.0f})" if a and b else ""
        name = f"{names[0]} turns/s >= {limit:g} x {names[1]}'s"
        return Aim(name, [(num(value, ".3f"), figure, at_least(value, limit))])

    single, base = find(rows, "W1", SINGLE), find(rows, "W1", BASELINE)
    single_p50 = single.p50_ms if single else None
    found = [
        per_turn("rows/turn", AIM_ROWS_PER_TURN, lambda r: r.rows_per_turn),
        per_turn("WAL KB/turn", AIM_WAL_KB_PER_TURN, lambda r: r.wal_kb_per_turn),
        per_turn(
            "Postgres CPU ms/turn (db)", AIM_PG_CPU_MS_PER_TURN, lambda r: r.pg_cpu_ms_per_turn
        ),
        per_turn("process CPU ms/turn", AIM_CPU_MS_PER_TURN, lambda r: r.cpu_ms_per_turn),
        over(base, floor_of(rows, base), AIM_W1_64_OVER_FLOOR, (BASELINE, "its floor")),
        over(single, floor_of(rows, single), AIM_W1_1_OVER_FLOOR, (SINGLE, "its floor")),
        Aim(
            f"{SINGLE} p50 ms <= {AIM_W1_1_P50_MS:g}",
            [(SINGLE, num(single_p50, ".2f"), at_most(single_p50, AIM_W1_1_P50_MS))],
        ),
        over(find(rows, "W1", LATENCY), base, AIM_W1_L_OVER_W1_64, (LATENCY, BASELINE)),
    ]
    for timing in report.reads.timings if report.reads else []:
        found.append(
            Aim(
                f"{timing.what}: p50 ms <= {timing.aim_ms:g}",
                [("", f"{timing.p50_ms:.2f}", at_most(timing.p50_ms, timing.aim_ms))],
            )
        )
    if report.idle is not None:
        idle = report.idle.cpu_pct
        found.append(
            Aim(
                f"idle serve: % of a core <= {AIM_IDLE_CPU_PCT:g}",
                [("", f"{idle:.2f}", at_most(idle, AIM_IDLE_CPU_PCT))],
            )
        )
    return found


def summary(report: Report, scenarios: Sequence[Scenario]) -> dict[str, Any]:
    rows = report.rows
    base = find(rows, "W1", BASELINE)
    base_floor = floor_of(rows, base)
    latency = next((s for s in scenarios if s.name == LATENCY), None)
    ideal = (
        latency.capacity / (latency.latency_ms / 1000) if latency and latency.latency_ms else None
    )
    base_cpu, floor_cpu = machine_cpu_ms(base), machine_cpu_ms(base_floor)
    cores = os.cpu_count() or 1
    # What W1 would reach if its CPU per turn (ours and the server's) kept every core busy
    # and nothing ever waited: the most this machine can give it without doing less per turn.
    ceiling = cores * 1000 / base_cpu if base_cpu else None
    problems = sum(len(r.problems) for r in rows)
    problems += len(report.reads.problems) if report.reads else 0
    problems += len(report.idle.problems) if report.idle else 0
    return {
        "w1_64_over_floor": ratio(base, base_floor),
        "w1_1_over_floor": ratio(
            find(rows, "W1", SINGLE), floor_of(rows, find(rows, "W1", SINGLE))
        ),
        "w1_l_over_w1_64": ratio(find(rows, "W1", LATENCY), base),
        "w1_l_ideal_turns_per_s": ideal,
        "w1_64_cpu_ms_per_turn": base_cpu,
        "floor_cpu_ms_per_turn": floor_cpu,
        "cores": cores,
        "w1_64_cpu_ceiling_turns_per_s": ceiling,
        "w1_64_cpu_ceiling_over_floor": (
            ceiling / base_floor.turns_per_s if ceiling and base_floor else None
        ),
        "aims": [asdict(a) for a in aims(report)],
        "problems": problems,
    }


def machine_cpu_ms(row: Row | None) -> float | None:
    """CPU per turn of this process and the server's processes for its database together."""
    if row is None or row.pg_cpu_ms_per_turn is None:
        return None
    return row.cpu_ms_per_turn + row.pg_cpu_ms_per_turn


def render(report: Report, totals: dict[str, Any]) -> str:
    rows = report.rows
    header = (
        f"{'scenario':<12} {'R':>5} {'T':>3} {'C':>4} {'wall s':>7} {'turns/s':>8} "
        f"{'runs/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'commits/turn':>12} "
        f"{'commits/turn':>12} {'rows':>6} {'CPU ms':>7} {'pg CPU ms':>9} {'pg CPU ms':>9} "
        f"{'WAL KB':>7} {'peak RSS':>8} {'check':>5}"
    )
    subheader = f"{'':<12} {'':>5} {'':>3} {'':>4} {'':>7} {'':>8} {'':>7} {'':>7} {'':>7} "
    subheader += f"{'(pg)':>12} {'(proc)':>12} {'/turn':>6} {'/turn':>7} {'/turn db':>9} "
    subheader += f"{'/turn all':>9} {'/turn':>7} {'MB':>8}"
    lines = [header, subheader, "-" * len(header)]
    ordered = sorted(rows, key=lambda r: r.kind != "W1")
    for r in ordered:
        lines.append(
            f"{r.scenario:<12} {r.runs:>5} {r.turns:>3} {r.capacity:>4} {r.wall_s:>7.2f} "
            f"{r.turns_per_s:>8.0f} {num(r.runs_per_s, '.1f'):>7} {r.p50_ms:>7.2f} "
            f"{r.p99_ms:>7.2f} {num(r.commits_per_turn_pg, '.3f'):>12} "
            f"{num(r.commits_per_turn_proc, '.3f'):>12} {r.rows_per_turn:>6.2f} "
            f"{r.cpu_ms_per_turn:>7.2f} {num(r.pg_cpu_ms_per_turn, '.2f'):>9} "
            f"{num(r.server_cpu_ms_per_turn, '.2f'):>9} {r.wal_kb_per_turn:>7.2f} "
            f"{r.peak_rss_mb:>8.1f} {verdict(not r.problems):>5}"
        )
    lines += ["", "rows/turn by table (tuples inserted + updated + deleted, pg_stat_user_tables):"]
    for r in ordered:
        if r.kind == "W1":
            by_table = ", ".join(
                f"{t.removeprefix('public.')} {n:.3f}"
                for t, n in sorted(r.rows_by_table.items(), key=lambda item: -item[1])
            )
            lines.append(f"  {r.scenario:<10} {by_table}")

    if report.reads is not None:
        reads = report.reads
        build = reads.build
        lines += [
            "",
            f"reads of a conversation of {reads.turns} turns ({reads.runs} W1 runs x "
            f"{build.turns} turns one after the other, {reads.messages} messages; written at "
            f"{build.turns_per_s:.0f} turns/s, CPU {build.cpu_ms_per_turn:.2f} ms/turn, "
            f"pg CPU {num(build.pg_cpu_ms_per_turn, '.2f')} ms/turn, "
            f"rows {build.rows_per_turn:.2f}/turn):",
            f"  {'read':<42} {'reads':>5} {'items':>6} {'p50 ms':>7} {'p99 ms':>7} "
            f"{'CPU ms':>7} {'check':>5}",
        ]
        for t in reads.timings:
            lines.append(
                f"  {t.what:<42} {t.reads:>5} {t.items:>6} {t.p50_ms:>7.2f} {t.p99_ms:>7.2f} "
                f"{t.cpu_ms:>7.2f} {verdict(not reads.problems):>5}"
            )
        lines.append("  (CPU ms: this process's per read, mean; the rest is Postgres and waits)")
    if report.idle is not None:
        idle = report.idle
        lines += [
            "",
            f"idle loopwright serve over {idle.seconds:.1f} s: {idle.cpu_pct:.2f} % of a core; "
            f"PostgreSQL meanwhile {num(idle.pg_cpu_pct, '.2f')} % for its database "
            f"({num(idle.server_cpu_pct, '.2f')} % the whole server) "
            f"{verdict(not idle.problems)}",
        ]

    lines += ["", "aims on this machine (MISSED is reported, not a failure: only checks fail):"]
    for aim in totals["aims"]:
        judged = "  ".join(
            f"{what + ' ' if what else ''}{figure} {aim_mark(met)}"
            for what, figure, met in aim["figures"]
        )
        lines.append(f"  {aim['aim']:<52} {judged}")

    lines.append("")
    ideal = totals["w1_l_ideal_turns_per_s"]
    lines.append(
        f"ideal W1-L turns/s (C / LLM latency): {'n/a' if ideal is None else f'{ideal:.0f}'}"
    )
    w1_cpu, floor_cpu = totals["w1_64_cpu_ms_per_turn"], totals["floor_cpu_ms_per_turn"]
    if w1_cpu is not None and floor_cpu is not None:
        lines.append(
            f"CPU per turn, this process + Postgres (db): W1 C=64 {w1_cpu:.2f} ms, "
            f"floor {floor_cpu:.2f} ms ({w1_cpu / floor_cpu:.1f}x)"
        )
    ceiling = totals["w1_64_cpu_ceiling_turns_per_s"]
    if ceiling is not None:
        lines.append(
            f"W1 C=64 if that CPU kept all {totals['cores']} cores busy: {ceiling:.0f} turns/s "
            f"= {num(totals['w1_64_cpu_ceiling_over_floor'], '.2f')} x floor"
        )
    if totals["problems"]:
        lines.append(f"{totals['problems']} problems: see stderr")
    return "\n".join(lines)


def parse_scenarios(spec: str) -> list[Scenario]:
    scenarios = []
    for item in spec.split(","):
        if not item.strip():
            continue
        name, _, numbers = item.strip().partition("=")
        parts = [int(n) for n in numbers.split(":")]
        if len(parts) not in (3, 4) or min(parts[:3]) < 1 or (len(parts) == 4 and parts[3] < 0):
            raise ValueError(f"bad scenario {item!r}: want NAME=R:T:C[:LATENCY_MS]")
        scenarios.append(Scenario(name, *parts))
    return scenarios


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_SERVER),
        help="a PostgreSQL server; a scratch database per scenario is created and dropped",
    )
    parser.add_argument(
        "--scenarios",
        default=DEFAULT_SCENARIOS,
        help=f"comma-separated NAME=R:T:C[:LATENCY_MS] (default {DEFAULT_SCENARIOS}); "
        f"the summary compares {BASELINE} with its floor and {LATENCY} with {BASELINE}",
    )
    parser.add_argument(
        "--only",
        help="comma-separated scenario names to run, and `reads` (the reads of a long "
        "conversation) and `idle` (an idle `loopwright serve`'s CPU), which run last; "
        "without it, everything runs",
    )
    parser.add_argument("--quick", action="store_true", help="divide every R by 10")
    parser.add_argument("--no-floor", action="store_true", help="skip the asyncpg floor")
    parser.add_argument(
        "--profile",
        default="",
        help="comma-separated scenario names whose timed section is run under cProfile "
        "(summary to stderr; it slows the scenario down)",
    )
    parser.add_argument("--profile-top", type=int, default=30, help="functions listed")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    try:
        args.scenario_list = parse_scenarios(args.scenarios)
    except ValueError as exc:
        parser.error(str(exc))
    args.reads = args.idle = True
    if args.only:
        wanted = {n.strip() for n in args.only.split(",") if n.strip()}
        unknown = wanted - {s.name for s in args.scenario_list} - {"reads", "idle"}
        if unknown:
            parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
        args.scenario_list = [s for s in args.scenario_list if s.name in wanted]
        args.reads, args.idle = "reads" in wanted, "idle" in wanted
    if args.quick:
        args.scenario_list = [
            Scenario(s.name, max(1, s.runs // 10), s.turns, s.capacity, s.latency_ms)
            for s in args.scenario_list
        ]
    if not (args.scenario_list or args.reads or args.idle):
        parser.error("nothing to run")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    started = time.perf_counter()
    profile = {n.strip() for n in args.profile.split(",") if n.strip()}
    tune_gc()  # as `loopwright serve` and `worker` do
    # Traced as the OTEL_* variables say, as `serve` and `worker` are (off by default); e.g.
    # OTEL_TRACES_EXPORTER=console measures what the spans cost (their JSON lines go to stdout).
    tracing.configure()
    log(f"load average before: {' '.join(f'{n:.2f}' for n in os.getloadavg())}")
    try:
        report = asyncio.run(
            bench(
                args.database_url,
                args.scenario_list,
                floor=not args.no_floor,
                reads=args.reads,
                idle=args.idle,
                profile=profile,
                top=args.profile_top,
            )
        )
    finally:
        tracing.stop()
    elapsed = time.perf_counter() - started
    load = " ".join(f"{n:.2f}" for n in os.getloadavg())
    totals = summary(report, args.scenario_list)
    if args.json:
        reads, idle = report.reads, report.idle
        out: dict[str, Any] = {
            "scenarios": [asdict(s) for s in args.scenario_list],
            "quick": args.quick,
            "elapsed_s": round(elapsed, 1),
            "load_average_after": load,
            "rows": [asdict(r) | {"check": verdict(not r.problems)} for r in report.rows],
            "reads": asdict(reads) | {"check": verdict(not reads.problems)} if reads else None,
            "idle": asdict(idle) | {"check": verdict(not idle.problems)} if idle else None,
            "summary": totals,
        }
        print(json.dumps(out, indent=2))
    else:
        print(render(report, totals))
        print(f"load average at the end (1, 5, 15 min): {load}")
        print(f"total run time {elapsed:.1f}s")
    exit_on_bad_checks()


if __name__ == "__main__":
    main()
