"""A person's cancel, heard while the loop waits on a model call or runs a tool batch.

A model call has no side effects, so a run cancelled during one need not wait for its
answer: the call is abandoned and the run settles `cancelled` at once. (A tool call is
never cut short: its side effect may be half done; the cancel is seen at the next
boundary.) The watch wakes when the run's stream gets an event (a cancel appends
`agent_run.cancel_requested`; another process's cancel arrives through NOTIFY) and then
reads the run's flag. It also reads the flag every `poll_s`, because a wake-up may be
lost. Between the calls of a tool batch, `CancelFlag` says whether a cancel came, reading
the flag only when the stream woke, so that a cancelled run starts no further call.

A flag that cannot be read (the database is away) is no cancel: it is read again at the
next wake-up or poll, and the run's next boundary, which waits for the database, returns
it anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.streams import run_stream
from app.db.outage import connection_lost
from app.events.engine.bus import EventBus, Subscription
from app.runs.store import runs as run_store

T = TypeVar("T")


class CancelledDuringCall(Exception):
    """Raised in place of a call's answer: the run was cancelled while it waited."""


async def unless_cancelled(
    call: Awaitable[T],
    *,
    run_id: str,
    bus: EventBus,
    sessionmaker: async_sessionmaker[AsyncSession],
    poll_s: float,
) -> T:
    """The answer of `call`; `CancelledDuringCall` (with the call abandoned) when the run is
    cancelled first."""
    # Subscribed before the call starts, so a cancel committed from now on wakes the watch.
    with bus.subscribe(run_stream(run_id), ephemeral=False) as woken:
        answer = asyncio.ensure_future(call)
        watch = asyncio.ensure_future(_cancel_requested(woken.wait, run_id, sessionmaker, poll_s))
        try:
            await asyncio.wait({answer, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            answer_first = answer.done()
            for task in (answer, watch):
                task.cancel()  # no-op for the one that is done
            # The abandoned call is cancelled and let unwind (its connection closed) here.
            await asyncio.gather(answer, watch, return_exceptions=True)
        if answer_first:
            return answer.result()  # an answer that came first wins (a cancel is seen next)
        raise CancelledDuringCall()


async def _cancel_requested(
    woken: Callable[[float], Awaitable[bool]],
    run_id: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    poll_s: float,
) -> None:
    """Returns once the run's cancel flag is set."""
    while True:
        await woken(poll_s)
        if await _read(sessionmaker, run_id):
            return


async def _read(sessionmaker: async_sessionmaker[AsyncSession], run_id: str) -> bool | None:
    """The run's cancel flag; None while the database cannot be reached."""
    try:
        async with sessionmaker() as session:
            return await run_store.cancel_requested(session, run_id)
    except Exception as exc:
        if connection_lost(exc):
            return None
        raise


class CancelFlag:
    """Whether the run was cancelled since the flag was raised: read from the database only
    after the run's stream woke (a batch's own events wake it too; that costs a read)."""

    def __init__(
        self,
        woken: Subscription,
        run_id: str,
        sessionmaker: async_sessionmaker[AsyncSession],
    ) -> None:
        self._woken = woken
        self._run_id = run_id
        self._sessionmaker = sessionmaker
        self._cancelled = False
        self._unread = False  # a wake-up whose read failed: read again next time

    async def raised(self) -> bool:
        if not self._cancelled and (self._woken.take_wake() or self._unread):
            flag = await _read(self._sessionmaker, self._run_id)
            self._unread = flag is None
            self._cancelled = bool(flag)
        return self._cancelled


@contextmanager
def cancel_flag(
    run_id: str, *, bus: EventBus, sessionmaker: async_sessionmaker[AsyncSession]
) -> Iterator[CancelFlag]:
    with bus.subscribe(run_stream(run_id), ephemeral=False) as woken:
        yield CancelFlag(woken, run_id, sessionmaker)
