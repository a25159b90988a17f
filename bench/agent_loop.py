"""Workload W1: durable ReAct loops (scripted model, `echo` tool) through the run workers,
measured as turns/s, per-turn latency and Postgres commits per turn, beside a floor of plain
asyncpg inserts with one commit per turn."""

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
import secrets
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import asyncpg
from common import (
    ServerMeter,
    admin,
    exit_on_bad_checks,
    keep_session,
    log,
    peak_rss_mb,
    percentile,
    verdict,
    with_database,
)
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core.config import DatabaseSettings, LLMSettings, Settings, WorkerSettings
from app.core.model_config import ModelConfig, ScriptedToolCall, ScriptedTurn
from app.core.process import tune_gc
from app.core.states import RUN_SETTLED, RunStatus
from app.core.vocabulary import StepKind
from app.engine.agents import AgentCommands
from app.engine.bus import EventBus
from app.engine.group_commit import GroupCommitter
from app.engine.runs import RunCommands
from app.llm import tokens
from app.llm.providers.registry import Providers
from app.loop.boundary import RIDE_OUT, BoundaryWrite, write_boundaries
from app.loop.tools.base import Tool, ToolContext, define_tool
from app.schemas.agents import AgentCreate, Limits
from app.schemas.runs import RunCreate, RunRead
from app.store import conversations, history, migrate
from app.store.db import libpq_url, make_engine, make_sessionmaker
from app.wiring import build_tools, build_workers

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
# name=runs:turns:capacity[:latency_ms]
DEFAULT_SCENARIOS = "W1-1=200:10:1,W1-16=1000:10:16,W1-64=2000:10:64,W1-L=2000:5:500:50"
BASELINE, LATENCY, SINGLE = "W1-64", "W1-L", "W1-1"
READ_TURNS, READ_REPEATS = 1_000, 30
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
    # The PostgreSQL server's CPU time and WAL per turn (CPU: None when the server is not
    # on this machine). With the process's CPU, what one turn costs the machine.
    server_cpu_ms_per_turn: float | None
    wal_kb_per_turn: float
    # Rows inserted, updated or deleted per turn, across every table (pg_stat_user_tables).
    rows_per_turn: float | None
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


async def create_runs(runs: RunCommands, agent_id: str, count: int) -> None:
    gate = asyncio.Semaphore(CREATE_CONCURRENCY)

    async def one(i: int) -> None:
        async with gate:
            await runs.create(RunCreate(agent_id=agent_id, input=f"bench run {i}"))

    await asyncio.gather(*(one(i) for i in range(count)))


async def xact_commits(url: str, database: str) -> int:
    """The server's commit counter for `database`, read on a fresh connection after a pause:
    a backend flushes its counters when it exits (or up to seconds later while it idles),
    so callers close their connections first rather than rely on
    pg_stat_force_next_flush(), which only flushes the calling session."""
    await asyncio.sleep(STATS_SETTLE_S)
    conn = await asyncpg.connect(libpq_url(url))
    try:
        value = await conn.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", database
        )
    finally:
        await conn.close()
    return int(value)


async def rows_written(url: str) -> int:
    """Rows inserted, updated and deleted in the database so far, read after a pause as
    `xact_commits` reads its counter (backends flush their statistics when they exit)."""
    await asyncio.sleep(STATS_SETTLE_S)
    conn = await asyncpg.connect(libpq_url(url))
    try:
        value = await conn.fetchval(
            "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables"
        )
    finally:
        await conn.close()
    return int(value)


async def commits_baseline(url: str, database: str) -> tuple[int, int]:
    """The commit counter before a timed section, and what one reading adds to it (the
    reading connection's own transactions, counted once it has exited)."""
    first = await xact_commits(url, database)
    second = await xact_commits(url, database)
    return second, second - first


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
    or final step; tool_result steps fall inside a turn."""
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
                    "SELECT n, count(*) AS runs FROM (SELECT count(*) AS n FROM run_history, "
                    "jsonb_array_elements(messages) AS m WHERE m ->> 'role' = 'assistant' "
                    "GROUP BY run_id) AS a GROUP BY n"
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


async def w1_scenario(url: str, database: str, scenario: Scenario, profile_top: int) -> Row:
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
        await create_runs(runs, agent.id, scenario.runs)
        # Close every pooled connection so that their backends exit and flush their
        # counters before the baseline is read.
        await sa_engine.dispose()
        before, per_read = await commits_baseline(url, database)
        rows_before = await rows_written(url)
        server = await ServerMeter.connect(url)
        await server.start()

        tokens.encoding()  # loaded once per process (~0.3 s), as a server does at start-up
        log(f"  running {scenario.runs} runs x {scenario.turns} turns on {scenario.capacity}")
        profiler = cProfile.Profile() if profile_top else None
        committer.start()
        if profiler is not None:
            profiler.enable()
        started, cpu_started = time.perf_counter(), time.process_time()
        pool.start()
        await committer.wait_all_settled()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        if profiler is not None:
            profiler.disable()
        proc_commits = committer.commits
        await pool.stop(grace_s=5)
        await committer.stop()
        await sa_engine.dispose()
        pg_commits = await xact_commits(url, database) - before - per_read
        server_cpu, wal = await server.stop()
        rows = await rows_written(url) - rows_before

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
        commits_per_turn_pg=pg_commits / turns,
        commits_per_turn_proc=proc_commits / turns,
        cpu_ms_per_turn=cpu / turns * 1000,
        server_cpu_ms_per_turn=per_turn_ms(server_cpu, turns),
        wal_kb_per_turn=wal / turns / 1024,
        rows_per_turn=rows / turns,
        peak_rss_mb=peak_rss_mb(),
        problems=problems,
    )


def per_turn_ms(seconds: float | None, turns: int) -> float | None:
    return None if seconds is None else seconds / turns * 1000


async def floor_scenario(url: str, database: str, scenario: Scenario) -> Row:
    """C clients, each writing its runs' turns as one ~1 KB JSONB row and one commit each."""
    await admin(
        url,
        "CREATE TABLE IF NOT EXISTS bench_turns (id bigserial PRIMARY KEY, run_id text, "
        "turn int, body jsonb, created_at timestamptz DEFAULT now())",
    )
    before, per_read = await commits_baseline(url, database)
    server = await ServerMeter.connect(url)
    await server.start()
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

        started, cpu_started = time.perf_counter(), time.process_time()
        await asyncio.gather(
            *(client(range(c, scenario.runs, scenario.capacity)) for c in range(scenario.capacity))
        )
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        await pool.close()
        pg_commits = await xact_commits(url, database) - before - per_read
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
        commits_per_turn_pg=pg_commits / turns,
        commits_per_turn_proc=None,
        cpu_ms_per_turn=cpu / turns * 1000,
        server_cpu_ms_per_turn=per_turn_ms(server_cpu, turns),
        wal_kb_per_turn=wal / turns / 1024,
        rows_per_turn=1.0,  # one insert per turn, by construction
        peak_rss_mb=peak_rss_mb(),
        problems=problems,
    )


@dataclass
class Reads:
    """Read paths over a long history: the whole transcript of a conversation of
    `turns` turns (as the loop reads its context, and as `GET …/messages` pages it), and
    one page of a run's history."""

    turns: int
    context_p50_ms: float
    context_p99_ms: float
    messages_page_p50_ms: float
    history_page_p50_ms: float
    history_page_p99_ms: float


async def read_scenario(server_url: str, turns: int, repeats: int) -> Reads:
    """A run of `turns` W1 turns written straight into the history (two steps a turn, as
    the loop writes them), then its reads timed."""
    name = f"lw_bench_{secrets.token_hex(4)}"
    await admin(server_url, f'CREATE DATABASE "{name}"')
    url = with_database(server_url, name)
    sa_engine = make_engine(url, pool_size=2)
    try:
        await migrate.upgrade(sa_engine)
        sessionmaker = make_sessionmaker(sa_engine)
        agent = await AgentCommands(sessionmaker).create(agent_body(Scenario("reads", 1, 10, 1)))
        run, _ = await RunCommands(sessionmaker, EventBus()).create(
            RunCreate(agent_id=agent.id, input="read me")
        )
        async with sessionmaker.begin() as session:
            for turn in range(turns):
                for step in _turn_steps(run, turn):
                    await history.append_locked(session, step)
        context_s, page_s, history_s = [], [], []
        async with sessionmaker() as session:
            for _ in range(repeats):
                begun = time.perf_counter()
                messages, _ = await conversations.read_context(session, run.conversation_id)
                context_s.append(time.perf_counter() - begun)
                begun = time.perf_counter()
                await history.read_messages(session, run.conversation_id, after=turns, limit=200)
                page_s.append(time.perf_counter() - begun)
                begun = time.perf_counter()
                await history.steps(session, run.id, after=turns, limit=50)
                history_s.append(time.perf_counter() - begun)
        assert len(messages) == 2 * turns, len(messages)
    finally:
        await sa_engine.dispose()
        await admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    context_s.sort()
    page_s.sort()
    history_s.sort()
    return Reads(
        turns,
        percentile(context_s, 0.5) * 1000,
        percentile(context_s, 0.99) * 1000,
        percentile(page_s, 0.5) * 1000,
        percentile(history_s, 0.5) * 1000,
        percentile(history_s, 0.99) * 1000,
    )


def _turn_steps(run: RunRead, turn: int) -> list[history.NewStep]:
    """A W1 turn's two steps: the model's call of an echo tool, then its result."""
    call_id = f"toolu_{turn:06d}"
    note = {"note": ECHO_NOTE, "turn": turn}
    use = {"type": "tool_use", "id": call_id, "name": "echo_a", "input": note}
    answer = {"type": "tool_result", "tool_use_id": call_id, "content": json.dumps(note)}
    started = {"id": call_id, "tool": "echo_a", "idempotent": True}
    usage = {"input_tokens": 100 * turn, "output_tokens": 10 * turn}
    resume: dict[str, Any] = {"loop": {}, "prompt_hash": ""}
    now = datetime.now(UTC)

    def step(kind: StepKind, message: dict[str, Any], data: dict[str, Any]) -> history.NewStep:
        return history.NewStep(
            run.id, run.conversation_id, kind, RunStatus.RUNNING, now, [message], data | resume
        )

    return [
        step(
            StepKind.LLM_RESPONSE,
            {"role": "assistant", "content": [use]},
            {"started": [started], "iteration": turn + 1, "usage": usage},
        ),
        step(
            StepKind.TOOL_RESULT,
            {"role": "user", "content": [answer]},
            {"completed": [{"id": call_id, "attempts": 1}]},
        ),
    ]


async def scenario_rows(
    server_url: str, scenario: Scenario, *, floor: bool, profile_top: int
) -> list[Row]:
    """W1 and then its floor, in a scratch database of their own, dropped whatever happens."""
    name = f"lw_bench_{secrets.token_hex(4)}"
    await admin(server_url, f'CREATE DATABASE "{name}"')
    url = with_database(server_url, name)
    try:
        sa_engine = make_engine(url, pool_size=1)
        try:
            await migrate.upgrade(sa_engine)
        finally:
            await sa_engine.dispose()
        log(f"{scenario.name}: R={scenario.runs} T={scenario.turns} C={scenario.capacity}")
        rows = [await w1_scenario(url, name, scenario, profile_top)]
        if floor:
            log(f"floor C={scenario.capacity}: {scenario.runs * scenario.turns} turns")
            rows.append(await floor_scenario(url, name, scenario))
        return rows
    finally:
        await admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def bench(
    server_url: str, scenarios: Sequence[Scenario], *, floor: bool, profile: set[str], top: int
) -> list[Row]:
    rows: list[Row] = []
    for scenario in scenarios:
        profile_top = top if scenario.name in profile else 0
        rows += await scenario_rows(server_url, scenario, floor=floor, profile_top=profile_top)
    return rows


def find(rows: Sequence[Row], kind: str, name: str) -> Row | None:
    return next((r for r in rows if r.kind == kind and r.scenario == name), None)


def summary(rows: Sequence[Row], scenarios: Sequence[Scenario]) -> dict[str, Any]:
    def ratio(a: Row | None, b: Row | None) -> float | None:
        if a is None or b is None or b.turns_per_s == 0:
            return None
        return a.turns_per_s / b.turns_per_s

    base = find(rows, "W1", BASELINE)
    base_floor = find(rows, "floor", f"floor C={base.capacity}") if base else None
    latency = next((s for s in scenarios if s.name == LATENCY), None)
    ideal = (
        latency.capacity / (latency.latency_ms / 1000) if latency and latency.latency_ms else None
    )
    base_cpu, floor_cpu = machine_cpu_ms(base), machine_cpu_ms(base_floor)
    cores = os.cpu_count() or 1
    # What W1 would reach if its CPU per turn (ours and the server's) kept every core busy
    # and nothing ever waited: the most this machine can give it without doing less per turn.
    ceiling = cores * 1000 / base_cpu if base_cpu else None
    single = find(rows, "W1", SINGLE)
    single_floor = find(rows, "floor", "floor C=1")
    return {
        "w1_64_over_floor": ratio(base, base_floor),
        "w1_1_over_floor": ratio(single, single_floor),
        "w1_1_p50_ms": single.p50_ms if single else None,
        "w1_64_rows_per_turn": base.rows_per_turn if base else None,
        "w1_64_wal_kb_per_turn": base.wal_kb_per_turn if base else None,
        "w1_64_pg_cpu_ms_per_turn": base.server_cpu_ms_per_turn if base else None,
        "w1_64_proc_cpu_ms_per_turn": base.cpu_ms_per_turn if base else None,
        "w1_l_over_w1_64": ratio(find(rows, "W1", LATENCY), base),
        "w1_l_ideal_turns_per_s": ideal,
        "w1_64_cpu_ms_per_turn": base_cpu,
        "floor_cpu_ms_per_turn": floor_cpu,
        "cores": cores,
        "w1_64_cpu_ceiling_turns_per_s": ceiling,
        "w1_64_cpu_ceiling_over_floor": (
            ceiling / base_floor.turns_per_s if ceiling and base_floor else None
        ),
        "problems": sum(len(r.problems) for r in rows),
    }


def machine_cpu_ms(row: Row | None) -> float | None:
    """CPU per turn of this process and the server together."""
    if row is None or row.server_cpu_ms_per_turn is None:
        return None
    return row.cpu_ms_per_turn + row.server_cpu_ms_per_turn


def render(rows: Sequence[Row], totals: dict[str, Any]) -> str:
    def num(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    header = (
        f"{'scenario':<12} {'R':>5} {'T':>3} {'C':>4} {'wall s':>7} {'turns/s':>8} "
        f"{'runs/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'commits/turn':>12} "
        f"{'commits/turn':>12} {'CPU ms':>7} {'pg CPU':>7} {'WAL KB':>7} {'peak RSS':>8} "
        f"{'rows':>5} {'check':>5}"
    )
    subheader = f"{'':<12} {'':>5} {'':>3} {'':>4} {'':>7} {'':>8} {'':>7} {'':>7} {'':>7} "
    subheader += f"{'(pg)':>12} {'(proc)':>12} {'/turn':>7} {'ms/turn':>7} {'/turn':>7} {'MB':>8}"
    subheader += f" {'/turn':>5}"
    lines = [header, subheader, "-" * len(header)]
    for r in sorted(rows, key=lambda r: r.kind != "W1"):
        lines.append(
            f"{r.scenario:<12} {r.runs:>5} {r.turns:>3} {r.capacity:>4} {r.wall_s:>7.2f} "
            f"{r.turns_per_s:>8.0f} {num(r.runs_per_s, '.1f'):>7} {r.p50_ms:>7.2f} "
            f"{r.p99_ms:>7.2f} {num(r.commits_per_turn_pg, '.3f'):>12} "
            f"{num(r.commits_per_turn_proc, '.3f'):>12} {r.cpu_ms_per_turn:>7.2f} "
            f"{num(r.server_cpu_ms_per_turn, '.2f'):>7} {r.wal_kb_per_turn:>7.2f} "
            f"{r.peak_rss_mb:>8.1f} {num(r.rows_per_turn, '.1f'):>5} "
            f"{verdict(not r.problems):>5}"
        )

    def x(value: float | None, aim: str) -> str:
        return "n/a" if value is None else f"{value:.2f} (aim {aim})"

    def aim(label: str, value: float | None, limit: float, at_most: bool) -> str:
        if value is None:
            return f"{label}: n/a"
        met = value <= limit if at_most else value >= limit
        sign = "≤" if at_most else "≥"
        return f"{label}: {value:.2f} (aim {sign} {limit}) {'met' if met else 'NOT MET'}"

    lines.append("")
    for label, key, limit, at_most in [
        ("W1 C=64 rows per turn", "w1_64_rows_per_turn", 3, True),
        ("W1 C=64 WAL KB per turn", "w1_64_wal_kb_per_turn", 3, True),
        ("W1 C=64 Postgres CPU ms per turn", "w1_64_pg_cpu_ms_per_turn", 0.2, True),
        ("W1 C=64 process CPU ms per turn", "w1_64_proc_cpu_ms_per_turn", 0.4, True),
        ("W1 C=64 turns/s / floor C=64 turns/s", "w1_64_over_floor", 0.2, False),
        ("W1-1 turns/s / floor C=1 turns/s", "w1_1_over_floor", 0.15, False),
        ("W1-1 p50 ms per turn", "w1_1_p50_ms", 2, True),
        ("W1-L turns/s / W1 C=64 turns/s", "w1_l_over_w1_64", 0.9, False),
    ]:
        lines.append(aim(label, totals[key], limit, at_most))
    reads = totals.get("reads")
    if reads is not None:
        lines.append(
            aim(f"transcript of {reads['turns']} turns, p50 ms", reads["context_p50_ms"], 50, True)
            + f" (p99 {reads['context_p99_ms']:.2f}; a page of 200 messages "
            f"p50 {reads['messages_page_p50_ms']:.2f})"
        )
        lines.append(
            aim("one page of history (50 steps), p50 ms", reads["history_page_p50_ms"], 10, True)
            + f" (p99 {reads['history_page_p99_ms']:.2f})"
        )
    ideal = totals["w1_l_ideal_turns_per_s"]
    lines.append(
        f"ideal W1-L turns/s (C / LLM latency): {'n/a' if ideal is None else f'{ideal:.0f}'}"
    )
    w1_cpu, floor_cpu = totals["w1_64_cpu_ms_per_turn"], totals["floor_cpu_ms_per_turn"]
    if w1_cpu is not None and floor_cpu is not None:
        lines.append(
            f"CPU per turn, this process + server: W1 C=64 {w1_cpu:.2f} ms, "
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
    parser.add_argument("--only", help="comma-separated scenario names to run")
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
    parser.add_argument("--no-reads", action="store_true", help="skip the read timings")
    args = parser.parse_args(argv)
    try:
        args.scenario_list = parse_scenarios(args.scenarios)
    except ValueError as exc:
        parser.error(str(exc))
    if args.only:
        wanted = {n.strip() for n in args.only.split(",") if n.strip()}
        unknown = wanted - {s.name for s in args.scenario_list}
        if unknown:
            parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
        args.scenario_list = [s for s in args.scenario_list if s.name in wanted]
    if args.quick:
        args.scenario_list = [
            Scenario(s.name, max(1, s.runs // 10), s.turns, s.capacity, s.latency_ms)
            for s in args.scenario_list
        ]
    if not args.scenario_list:
        parser.error("no scenarios to run")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    started = time.perf_counter()
    profile = {n.strip() for n in args.profile.split(",") if n.strip()}
    tune_gc()  # as `loopwright serve` and `worker` do
    rows = asyncio.run(
        bench(
            args.database_url,
            args.scenario_list,
            floor=not args.no_floor,
            profile=profile,
            top=args.profile_top,
        )
    )
    totals = summary(rows, args.scenario_list)
    if not args.no_reads:
        log(f"reads: a conversation of {READ_TURNS} turns")
        reads = asyncio.run(read_scenario(args.database_url, READ_TURNS, READ_REPEATS))
        totals["reads"] = asdict(reads)
    elapsed = time.perf_counter() - started
    if args.json:
        report: dict[str, Any] = {
            "scenarios": [asdict(s) for s in args.scenario_list],
            "quick": args.quick,
            "elapsed_s": round(elapsed, 1),
            "rows": [asdict(r) | {"check": verdict(not r.problems)} for r in rows],
            "summary": totals,
        }
        print(json.dumps(report, indent=2))
    else:
        print(render(rows, totals))
        print(f"total run time {elapsed:.1f}s")
    exit_on_bad_checks()


if __name__ == "__main__":
    main()
