"""Riding out a lost database: which failures mean the connection failed (not the
statement), and waiting them out with backoff for as long as the caller may still act.

A worker that holds a run's lease may wait for the database instead of giving the run up:
the lease's fence still decides once the database is back. Only connection-class failures
are retried (the server unreachable, a connection reset or terminated, the server shutting
down or starting): the same work may succeed on a new connection. A constraint or data
error would fail again the same way, so it is raised at once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import asyncpg
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

T = TypeVar("T")

# SQLSTATEs of a connection the server ended or refused: class 08 (connection exception),
# and the server shutting down (57P01 admin_shutdown, pg_terminate_backend's; 57P02
# crash_shutdown) or not accepting connections yet (57P03 cannot_connect_now).
_SHUTDOWN_STATES = frozenset({"57P01", "57P02", "57P03"})


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` (or what it was raised from) says the database could not be reached or
    dropped the connection, rather than refusing the statement."""
    seen: BaseException | None = exc
    for _ in range(8):  # driver error → SQLAlchemy wrapper → ours; bounded against cycles
        if seen is None:
            return False
        if _lost(seen):
            return True
        seen = seen.__cause__
    return False


def _lost(exc: BaseException) -> bool:
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, OSError | asyncpg.ConnectionDoesNotExistError):  # refused, reset, timeout
        return True
    state = getattr(exc, "sqlstate", None)
    if isinstance(state, str) and (state.startswith("08") or state in _SHUTDOWN_STATES):
        return True
    # What asyncpg says of a connection it already knows to be closed (SQLAlchemy reads
    # the same words as a disconnect).
    return isinstance(exc, asyncpg.InterfaceError) and "connection is closed" in str(exc)


@dataclass(frozen=True)
class Backoff:
    """Delays between attempts: `first_s`, growing by `factor` up to `max_s`, each with up
    to a quarter of jitter so that processes that lost the database together do not all
    come back in step."""

    first_s: float = 0.05
    factor: float = 2.0
    max_s: float = 1.0

    def delays(self, rng: random.Random) -> Iterator[float]:
        delay = self.first_s
        while True:
            yield delay * (1 - rng.random() / 4)
            delay = min(self.max_s, delay * self.factor)


async def ride_out(
    attempt: Callable[[], Awaitable[T]],
    *,
    until: Callable[[], float],
    backoff: Backoff = Backoff(),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> T:
    """`attempt()`'s result, attempted again after a lost connection (with backoff) while
    `clock()` is before `until()`; read afresh each time: a renewal may extend it. The last
    connection error once the time is up; any other error at once."""
    delays = backoff.delays(rng or random.Random())
    while True:
        try:
            return await attempt()
        except Exception as exc:
            left = until() - clock()
            if not connection_lost(exc) or left <= 0:
                raise
            await sleep(min(next(delays), left))


async def current_xid(session: AsyncSession) -> str:
    """The id of the session's transaction (assigned now if it had none): once the
    connection is lost during COMMIT, `xid_status` tells whether it committed."""
    return str(await session.scalar(text("SELECT pg_current_xact_id()::text")))


async def xid_status(session: AsyncSession, xid: str) -> str | None:
    """`committed`, `aborted` or `in progress` (a terminated backend may still be on its
    way out); None once the server no longer knows (far older than any in doubt here)."""
    status = await session.scalar(
        text("SELECT pg_xact_status(CAST(CAST(:xid AS text) AS xid8))"), {"xid": xid}
    )
    return None if status is None else str(status)
