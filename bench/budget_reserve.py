"""What the budget check costs an LLM call: the reservation's transaction, alone and with
runs racing for one budget, beside a floor (an empty transaction) and the check with no
budget to reserve against, measured in the same run on a scratch database.

Each priced call of a run makes one such transaction before it starts (unpriced calls
make none). Reservers of one budget queue on its row lock, so their throughput is bounded
by one transaction at a time: the figure to compare with the LLM calls themselves (seconds)."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from decimal import Decimal

from agent_loop import DEFAULT_SERVER, scratch_database
from common import exit_on_bad_checks, log, percentile
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.costs.store import budgets as budget_store
from app.db.connection import make_engine, make_sessionmaker

CALLS = 400
RACERS = 16
WORST = Decimal("0.000001")


async def timed(
    calls: int, racers: int, call: Callable[[int], Awaitable[None]]
) -> tuple[float, list[float]]:
    """Wall time and each call's latency, `racers` at a time."""
    latencies: list[float] = []
    queue = iter(range(calls))

    async def racer() -> None:
        for n in queue:
            started = time.perf_counter()
            await call(n)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(racer() for _ in range(racers)))
    return time.perf_counter() - started, sorted(latencies)


async def bench(args: argparse.Namespace) -> None:
    async with scratch_database(args.database_url) as (_name, url):
        engine = make_engine(url, pool_size=RACERS)
        sessions = make_sessionmaker(engine)
        today = datetime.now(UTC).date()
        async with sessions.begin() as session:
            await budget_store.insert_budget(
                session,
                {
                    "id": "bgt_bench",
                    "scope": "agent",
                    "subject": "agt_budgeted",
                    "period": "month",
                    "limit_usd": Decimal(1_000),
                    "version": 1,
                },
                today=today,
            )

        async def floor(_n: int) -> None:
            async with sessions.begin() as session:
                await session.execute(text("SELECT 1"))

        def reserving(agent: str) -> Callable[[int], Awaitable[None]]:
            async def reserve(n: int) -> None:
                async with sessions.begin() as session:
                    spender = budget_store.Spender(f"run_{n}", agent, "", today)
                    await _reserved(session, spender)

            return reserve

        async def _reserved(session: AsyncSession, spender: budget_store.Spender) -> None:
            refused = await budget_store.reserve(session, spender, WORST)
            assert refused is None

        cases = [
            ("floor: an empty transaction", floor, 1),
            ("no budget applies", reserving("agt_free"), 1),
            ("one budget, one run", reserving("agt_budgeted"), 1),
            (f"one budget, {RACERS} runs racing", reserving("agt_budgeted"), RACERS),
        ]
        print(f"{'case':36} {'calls/s':>9} {'p50':>9} {'p99':>9}")
        for name, call, racers in cases:
            log(name)
            await timed(20, racers, call)  # warm the pool and the plans
            elapsed, latencies = await timed(args.calls, racers, call)
            p50, p99 = (percentile(latencies, q) * 1000 for q in (0.5, 0.99))
            print(f"{name:36} {args.calls / elapsed:9.0f} {p50:7.2f}ms {p99:7.2f}ms")
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_SERVER),
        help="a PostgreSQL server; a scratch database is created on it and dropped after",
    )
    parser.add_argument("--calls", type=int, default=CALLS, help="reservations per case")
    asyncio.run(bench(parser.parse_args()))
    exit_on_bad_checks()


if __name__ == "__main__":
    main()
