"""Group commit: the single-writer batch queue of a process, shared by the loop's boundary
writes and the TaskEngine.

Callers that reach a write at about the same time hand it to `submit()`; one writer task
takes whatever is queued (up to `max_batch`), passes it to the batch `write` function
inside a single transaction and commits once, so the cost of a commit (a WAL flush, the
round trips) is shared. Each item keeps its own result, and its caller hears of it only
after the commit; then `after_commit` sees the batch's results, in the writer, before the
next batch is taken.

If the shared transaction fails, each item is retried in a transaction of its own, so one
failing item cannot sink the others: `write` must therefore only talk to the session (it
may run twice). `isolate` may say that retrying cannot help (the database is unreachable):
then every item fails at once. A caller whose item failed gets `error(exc)`.

With `ride_out`, a group whose connection was lost is not failed: it is tried again with
backoff, each item for as long as `ride_out.until(item)` allows (a boundary: while its
worker's lease lasts), so a short outage costs a wait, not the write. A connection lost
during COMMIT leaves the outcome unknown; the transaction's id, taken when it began, tells
once the database is back whether it committed (its results stand) or not (it is written
again), so a group is never written twice.

When tracing, a group is a span of its own linked to the span of each write in it (a group
serves many runs and requests at once: see `app/telemetry/spans.py`).

A bounded queue (`queue_size`) refuses a write when full with `QueueFull`, carrying the
seconds after which to retry. `stop()` refuses new writes (`ShuttingDown`), lets the queued
ones commit within a timeout, then stops the writer; what is still queued fails with
`ShuttingDown`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import QueueFull, ShuttingDown
from app.db.outage import Backoff, connection_lost, current_xid, xid_status
from app.telemetry import spans

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext

log = logging.getLogger(__name__)

I = TypeVar("I")  # noqa: E741 - item
R = TypeVar("R")
BatchWrite = Callable[[AsyncSession, list[I]], Awaitable[list[R]]]
AfterCommit = Callable[[list[R]], Awaitable[None]]


def _always(exc: Exception) -> bool:
    return True


def _as_raised(exc: Exception) -> BaseException:
    return exc


@dataclass
class _Pending(Generic[I, R]):
    item: I
    future: asyncio.Future[R]
    link: SpanContext | None = None  # the writer's span, when tracing (the group links it)


@dataclass(frozen=True)
class RideOut(Generic[I]):
    """How long a group that lost its connection is tried again: each item until
    `until(item)` on `clock` (monotonic seconds), with `backoff` between attempts."""

    until: Callable[[I], float]
    backoff: Backoff = field(default_factory=Backoff)
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


class _InDoubt(Exception):
    """The connection was lost during COMMIT: transaction `xid` may have committed, with
    `results`."""

    def __init__(self, xid: str, results: list[Any]) -> None:
        super().__init__(f"commit of transaction {xid} in doubt")
        self.xid = xid
        self.results = results


class GroupCommitter(Generic[I, R]):
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        write: BatchWrite[I, R],
        *,
        max_batch: int = 256,
        queue_size: int = 0,
        queue_full_retry_after_s: int = 1,
        after_commit: AfterCommit[R] | None = None,
        isolate: Callable[[Exception], bool] = _always,
        error: Callable[[Exception], BaseException] = _as_raised,
        write_abandoned: bool = False,
        ride_out: RideOut[I] | None = None,
        name: str = "group-committer",
    ) -> None:
        """`queue_size` 0: unbounded. `write_abandoned`: an item whose caller went away
        (cancelled) before the writer took it is still written; by default it is
        dropped. `ride_out`: wait out a lost connection (see the module's docstring)."""
        self._sessionmaker = sessionmaker
        self._write = write
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Pending[I, R]] = asyncio.Queue(maxsize=queue_size)
        self._retry_after_s = queue_full_retry_after_s
        self._after_commit = after_commit
        self._isolate = isolate
        self._error = error
        self._write_abandoned = write_abandoned
        self._ride_out = ride_out
        self._rng = random.Random()
        self._name = name
        self._writer: asyncio.Task[None] | None = None
        self._accepting = False
        self.commits = 0  # transactions committed (for benchmarks)

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        if self._writer is None:
            self._accepting = True
            self._writer = asyncio.create_task(self._run(), name=self._name)

    @property
    def running(self) -> bool:
        return self._accepting and self._writer is not None and not self._writer.done()

    @property
    def queue_depth(self) -> int:
        """Writes waiting for the writer (not those in the batch it is committing)."""
        return self._queue.qsize()

    async def stop(self, drain_timeout_s: float = 10.0) -> None:
        """Refuse new writes, let the queued ones commit within the timeout, then cancel
        the writer; whatever is still queued fails with `shutting_down`."""
        self._accepting = False
        if self._writer is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), drain_timeout_s)
        self._writer.cancel()
        await asyncio.gather(self._writer, return_exceptions=True)
        self._writer = None
        while not self._queue.empty():
            _fail(self._queue.get_nowait(), ShuttingDown())
            self._queue.task_done()

    # -- submission ------------------------------------------------------------------

    async def submit(self, item: I) -> R:
        if not self._accepting:
            raise ShuttingDown()
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait(_Pending(item, future, spans.link_here()))
        except asyncio.QueueFull:
            raise QueueFull(self._retry_after_s) from None
        return await future

    # -- the writer ------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                with spans.group_commit(self._name, batch):
                    await self._commit_group(batch)
            except asyncio.CancelledError:
                for pending in batch:  # stopped mid-group (a long ride-out): say so
                    _fail(pending, ShuttingDown())
                raise
            finally:
                for _ in batch:
                    self._queue.task_done()
            # Let the callers just answered run and queue their next write, so that it
            # joins the next group instead of trailing it in a group of its own.
            await asyncio.sleep(0)

    async def _commit_group(self, batch: list[_Pending[I, R]]) -> None:
        batch = self._wanted(batch)
        if not batch:
            return
        try:
            batch, results = await self._attempts(batch)
        except Exception as exc:
            batch = self._wanted(batch)
            # A connection that was ridden out until its items' time ran out would not
            # come back for one of them alone.
            lost = self._ride_out is not None and connection_lost(exc)
            if len(batch) <= 1 or lost or not self._isolate(exc):
                for pending in batch:
                    _fail(pending, self._error(exc))
                return
            log.warning("group commit of %d failed (%s); retrying one by one", len(batch), exc)
            for pending in batch:
                await self._commit_group([pending])
            return
        for pending, result in zip(batch, results, strict=True):
            if not pending.future.done():  # else its caller went away; the write stands
                pending.future.set_result(result)
        if self._after_commit is not None:
            try:
                await self._after_commit(results)
            except Exception:  # the writer must outlive it
                log.exception("%s: after-commit step failed", self._name)

    def _wanted(self, batch: list[_Pending[I, R]]) -> list[_Pending[I, R]]:
        """The items still to write: by default not those whose caller was cancelled."""
        if self._write_abandoned:
            return batch
        return [p for p in batch if not p.future.done()]

    async def _attempts(self, batch: list[_Pending[I, R]]) -> tuple[list[_Pending[I, R]], list[R]]:
        """The group's transaction, and with `ride_out` its attempts across a lost
        connection; the items written (some may have run out of time) and their results.
        Raises what failed the last attempt."""
        ride = self._ride_out
        if ride is None:
            return batch, await self._transaction([p.item for p in batch])
        delays = ride.backoff.delays(self._rng)
        doubt: _InDoubt | None = None
        first = True
        while True:
            try:
                if doubt is not None:  # its items stay as they were until it is settled
                    status = await self._status(doubt.xid)
                    if status == "committed":
                        self.commits += 1
                        return batch, doubt.results
                    if status != "aborted":
                        # Unknown to the server: neither its results nor a second write
                        # can be trusted.
                        raise RuntimeError(f"transaction {doubt.xid}: {status}") from None
                    doubt = None
                return batch, await self._transaction([p.item for p in batch])
            except Exception as exc:
                if not connection_lost(exc):
                    raise
                doubt = exc if isinstance(exc, _InDoubt) else doubt
                now = ride.clock()
                if doubt is None:  # those whose time is up are given up, the rest go on
                    batch = [p for p in self._wanted(batch) if not self._gave_up(p, exc, now)]
                if not batch:
                    raise
                left = max(ride.until(p.item) for p in batch) - now
                if left <= 0:
                    raise
                if first:
                    log.warning("%s: database connection lost (%s); retrying", self._name, exc)
                    first = False
                await ride.sleep(min(next(delays), left))

    def _gave_up(self, pending: _Pending[I, R], exc: Exception, now: float) -> bool:
        assert self._ride_out is not None
        if self._ride_out.until(pending.item) > now:
            return False
        _fail(pending, self._error(exc))
        return True

    async def _status(self, xid: str) -> str | None:
        """Where a transaction in doubt ended; "in progress" is a lost connection too: its
        backend has not finished dying yet."""
        async with self._sessionmaker() as session:
            status = await xid_status(session, xid)
        if status == "in progress":
            raise ConnectionError(f"transaction {xid} still in progress")
        return status

    async def _transaction(self, items: list[I]) -> list[R]:
        xid: str | None = None
        results: list[R] | None = None
        async with self._sessionmaker() as session:
            try:
                async with session.begin():
                    if self._ride_out is not None:
                        xid = await current_xid(session)
                    results = await self._write(session, items)
            except Exception as exc:
                # The statements ran; only COMMIT failed: did it take effect?
                if results is not None and xid is not None and connection_lost(exc):
                    raise _InDoubt(xid, results) from exc
                raise
        assert results is not None
        self.commits += 1
        return results


def _fail(pending: _Pending[I, R], exc: BaseException) -> None:
    if not pending.future.done():
        pending.future.set_exception(exc)
