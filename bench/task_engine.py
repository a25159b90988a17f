"""Throughput and latency of the TaskEngine: group commit against one commit per mutation,
for task creates and transitions, beside a floor of plain asyncpg single-row inserts; and
the cost of a WIP limit: the same transitions in a project whose in_progress column has
one (the writer then locks the limit's row and counts the column for every batch)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import secrets
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import asyncpg
from common import (
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

from app.core.states import TaskStatus
from app.core.vocabulary import BoardColumn, WipMode
from app.db import migrate
from app.db.connection import libpq_url, make_engine, make_sessionmaker
from app.events.engine.bus import EventBus
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_mutations import CreateTask, TaskMutation, TransitionTask
from app.tasks.schemas.tasks import TaskCreate
from app.tasks.store import boards

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
# CASCADE: the tables that refer to tasks (sprints' backlogs, ...) are empty here anyway.
TRUNCATE_TASKS = (
    "TRUNCATE tasks, task_transitions, events, event_streams, idempotency_keys, wip_limits CASCADE"
)
GROUP_BATCH = 128
QUEUE_SIZE = 100_000
FLOOR_POOL_CAP = 20
FLOOR_INSERT = "INSERT INTO bench_floor (id, title) VALUES ($1, $2)"

GROUP, SINGLE, FLOOR = "group-commit", "one-commit", "asyncpg-floor"
CREATE, TRANSITION, LIMITED = "create", "transition", "wip-limit"
LIMITED_PROJECT = "bench"

T = TypeVar("T")


@dataclass(frozen=True)
class Sample:
    elapsed_s: float
    latencies_s: list[float]
    errors: int


@dataclass(frozen=True)
class Row:
    mode: str
    workload: str
    clients: int
    ops: int
    mutations_per_s: float
    p50_ms: float
    p99_ms: float
    errors: int
    checked: bool
    peak_rss_mb: float


async def drive(
    clients: int, items: Sequence[T], execute: Callable[[T], Awaitable[object]]
) -> Sample:
    """Split `items` over `clients` concurrent loops; time each call and the whole."""
    latencies: list[float] = []
    errors: list[BaseException] = []

    async def client(mine: Sequence[T]) -> None:
        for item in mine:
            started = time.perf_counter()
            try:
                await execute(item)
            except Exception as exc:
                errors.append(exc)
                continue
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client(items[c::clients]) for c in range(clients)))
    elapsed = time.perf_counter() - started
    if errors:
        log(f"  {len(errors)} operations failed; first: {errors[0]!r}")
    return Sample(elapsed, latencies, len(errors))


def make_row(mode: str, workload: str, clients: int, sample: Sample, checked: bool) -> Row:
    latencies = sorted(sample.latencies_s)
    ops = len(latencies) + sample.errors
    return Row(
        mode=mode,
        workload=workload,
        clients=clients,
        ops=ops,
        mutations_per_s=len(latencies) / sample.elapsed_s,
        p50_ms=percentile(latencies, 0.50) * 1000,
        p99_ms=percentile(latencies, 0.99) * 1000,
        errors=sample.errors,
        checked=checked,
        peak_rss_mb=peak_rss_mb(),
    )


def creates(
    count: int, assigned_to: str | None = None, project: str | None = None
) -> list[TaskMutation]:
    return [
        CreateTask(
            TaskCreate(title=f"bench task {i}", assigned_to=assigned_to, project=project), "bench"
        )
        for i in range(count)
    ]


async def scalar(sa_engine: AsyncEngine, sql: str) -> int:
    async with sa_engine.connect() as conn:
        return int((await conn.execute(text(sql))).scalar_one() or 0)


async def reset(sa_engine: AsyncEngine) -> None:
    async with sa_engine.begin() as conn:
        await conn.execute(text(TRUNCATE_TASKS))


async def seed_assigned(
    sessionmaker: async_sessionmaker[AsyncSession], count: int, project: str | None = None
) -> list[str]:
    """Tasks in status `assigned`, written through a group-commit engine of their own so the
    seeding costs the same whichever engine is measured next."""
    seeder = TaskEngine(sessionmaker, EventBus(), max_batch=GROUP_BATCH, queue_size=QUEUE_SIZE)
    seeder.start()
    try:
        results = await asyncio.gather(
            *(seeder.submit(m) for m in creates(count, "bench-agent", project))
        )
    finally:
        await seeder.stop()
    ids = [r.task.id for r in results]
    if any(r.task.status is not TaskStatus.ASSIGNED for r in results):
        raise RuntimeError("seeded tasks did not start in status 'assigned'")
    return ids


async def engine_scenario(
    sa_engine: AsyncEngine,
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    mode: str,
    workload: str,
    clients: int,
    ops: int,
    warmup: int,
) -> Row:
    await reset(sa_engine)
    mutations: list[TaskMutation]
    if workload == CREATE:
        mutations = creates(warmup + ops)
    else:
        project = LIMITED_PROJECT if workload == LIMITED else None
        ids = await seed_assigned(sessionmaker, warmup + ops, project)
        if project:  # strict, and never reached: every move is counted, none refused
            async with sessionmaker() as session, session.begin():
                limit = boards.Limit(warmup + ops + 1, WipMode.STRICT)
                await boards.set_limit(session, project, BoardColumn.IN_PROGRESS, limit)
        # Statistics as autovacuum would keep them, so the row locks use the primary key.
        async with sa_engine.begin() as conn:
            await conn.execute(text("ANALYZE tasks"))
        mutations = [TransitionTask(i, TaskStatus.IN_PROGRESS, actor="bench") for i in ids]

    max_batch = GROUP_BATCH if mode == GROUP else 1
    engine = TaskEngine(sessionmaker, EventBus(), max_batch=max_batch, queue_size=QUEUE_SIZE)
    engine.start()
    try:
        warm = await drive(clients, mutations[:warmup], engine.submit)
        sample = await drive(clients, mutations[warmup:], engine.submit)
    finally:
        await engine.stop()

    done = warmup + ops - warm.errors - sample.errors
    if workload == CREATE:
        stored = await scalar(sa_engine, "SELECT count(*) FROM tasks")
        expected_seq = done
    else:
        stored = await scalar(sa_engine, "SELECT count(*) FROM tasks WHERE status = 'in_progress'")
        expected_seq = warmup + ops + done
    last_seq = await scalar(sa_engine, "SELECT max(last_seq) FROM event_streams")
    checked = stored == done and last_seq == expected_seq
    if not checked:
        log(f"  check failed: {stored} rows for {done} mutations, last_seq {last_seq}")
    return make_row(mode, workload, clients, sample, checked)


async def floor_scenario(url: str, *, clients: int, ops: int, warmup: int) -> Row:
    size = min(clients, FLOOR_POOL_CAP)
    # No reset query on release (asyncpg's default), which would add a round trip to every
    # insert of the floor; the engine pays none: SQLAlchemy's rollback on return is skipped
    # outside a transaction.
    pool = await asyncpg.create_pool(
        libpq_url(url), min_size=size, max_size=size, reset=keep_session
    )
    try:
        await pool.execute("TRUNCATE bench_floor")
        rows = [
            (f"floor_{i}_{secrets.token_hex(6)}", f"bench task {i}") for i in range(warmup + ops)
        ]

        async def insert(row: tuple[str, str]) -> None:
            await pool.execute(FLOOR_INSERT, *row)

        await drive(clients, rows[:warmup], insert)
        sample = await drive(clients, rows[warmup:], insert)
        stored = await pool.fetchval("SELECT count(*) FROM bench_floor")
    finally:
        await pool.close()
    return make_row(FLOOR, CREATE, clients, sample, stored == warmup + ops - sample.errors)


async def run(url: str, client_counts: Sequence[int], ops: int, warmup: int) -> list[Row]:
    sa_engine = make_engine(url, pool_size=5)
    try:
        await migrate.upgrade(sa_engine)
        await admin(
            url,
            "CREATE TABLE bench_floor "
            "(id text primary key, title text, created_at timestamptz default now())",
        )
        sessionmaker = make_sessionmaker(sa_engine)
        rows: list[Row] = []
        # Modes alternate within each client count so that drift in the server (WAL, cache)
        # spreads over all of them rather than favouring whichever ran first.
        for clients in client_counts:
            scenarios = [(w, m) for w in (CREATE, TRANSITION) for m in (GROUP, SINGLE)]
            for workload, mode in [*scenarios, (LIMITED, GROUP)]:
                log(f"{mode} {workload} x{clients}")
                rows.append(
                    await engine_scenario(
                        sa_engine,
                        sessionmaker,
                        mode=mode,
                        workload=workload,
                        clients=clients,
                        ops=ops,
                        warmup=warmup,
                    )
                )
            log(f"{FLOOR} {CREATE} x{clients}")
            rows.append(await floor_scenario(url, clients=clients, ops=ops, warmup=warmup))
    finally:
        await sa_engine.dispose()
    order = {GROUP: 0, SINGLE: 1, FLOOR: 2}
    return sorted(rows, key=lambda r: (order[r.mode], r.workload, r.clients))


async def bench(server_url: str, client_counts: Sequence[int], ops: int, warmup: int) -> list[Row]:
    name = f"lw_bench_{secrets.token_hex(4)}"
    await admin(server_url, f'CREATE DATABASE "{name}"')
    try:
        return await run(with_database(server_url, name), client_counts, ops, warmup)
    finally:
        await admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def find(rows: Sequence[Row], mode: str, workload: str, clients: int) -> Row | None:
    return next(
        (r for r in rows if (r.mode, r.workload, r.clients) == (mode, workload, clients)), None
    )


def ratio(a: Row | None, b: Row | None) -> float | None:
    if a is None or b is None or b.mutations_per_s == 0:
        return None
    return a.mutations_per_s / b.mutations_per_s


def summary(rows: Sequence[Row], clients: int) -> dict[str, float | None]:
    group_create = find(rows, GROUP, CREATE, clients)
    return {
        "clients": clients,
        "create_group_over_single": ratio(group_create, find(rows, SINGLE, CREATE, clients)),
        "transition_group_over_single": ratio(
            find(rows, GROUP, TRANSITION, clients), find(rows, SINGLE, TRANSITION, clients)
        ),
        "create_group_over_floor": ratio(group_create, find(rows, FLOOR, CREATE, clients)),
        "transition_limited_over_unlimited": ratio(
            find(rows, GROUP, LIMITED, clients), find(rows, GROUP, TRANSITION, clients)
        ),
    }


def render(rows: Sequence[Row], totals: dict[str, float | None]) -> str:
    header = (
        f"{'mode':<14} {'workload':<10} {'clients':>7} {'ops':>6} {'mut/s':>9} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'errors':>6} {'check':>5} {'peak RSS MB':>11}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.mode:<14} {r.workload:<10} {r.clients:>7} {r.ops:>6} {r.mutations_per_s:>9.0f} "
            f"{r.p50_ms:>8.2f} {r.p99_ms:>8.2f} {r.errors:>6} {verdict(r.checked):>5} "
            f"{r.peak_rss_mb:>11.1f}"
        )

    def x(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}x"

    lines.append("")
    lines.append(
        f"at {totals['clients']:.0f} clients: group-commit/one-commit "
        f"create {x(totals['create_group_over_single'])}, "
        f"transition {x(totals['transition_group_over_single'])}; "
        f"group-commit/asyncpg-floor create {x(totals['create_group_over_floor'])}; "
        f"transition with a WIP limit/without {x(totals['transition_limited_over_unlimited'])}"
    )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_SERVER),
        help="a PostgreSQL server; a scratch database is created on it and dropped after",
    )
    parser.add_argument(
        "--clients",
        default="1,16,64",
        type=lambda s: [int(n) for n in s.split(",") if n.strip()],
        help="comma-separated concurrent client counts (default 1,16,64)",
    )
    parser.add_argument("--ops", type=int, default=3000, help="timed operations per scenario")
    parser.add_argument("--warmup", type=int, default=200, help="untimed operations first")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if not args.clients or min(args.clients) < 1 or args.ops < 1 or args.warmup < 0:
        parser.error("--clients needs positive counts, --ops ≥ 1, --warmup ≥ 0")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    started = time.perf_counter()
    rows = asyncio.run(bench(args.database_url, args.clients, args.ops, args.warmup))
    elapsed = time.perf_counter() - started
    totals = summary(rows, max(args.clients))
    if args.json:
        report: dict[str, Any] = {
            "ops": args.ops,
            "warmup": args.warmup,
            "clients": args.clients,
            "elapsed_s": round(elapsed, 1),
            "rows": [asdict(r) | {"check": verdict(r.checked)} for r in rows],
            "summary": totals,
        }
        print(json.dumps(report, indent=2))
    else:
        print(render(rows, totals))
        print(f"total run time {elapsed:.1f}s")
    exit_on_bad_checks()


if __name__ == "__main__":
    main()
