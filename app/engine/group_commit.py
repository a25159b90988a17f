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

A bounded queue (`queue_size`) refuses a write when full with `QueueFull`, carrying the
seconds after which to retry. `stop()` refuses new writes (`ShuttingDown`), lets the queued
ones commit within a timeout, then stops the writer; what is still queued fails with
`ShuttingDown`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import QueueFull, ShuttingDown

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
        name: str = "group-committer",
    ) -> None:
        """`queue_size` 0: unbounded. `write_abandoned`: an item whose caller went away
        (cancelled) before the writer took it is still written; by default it is
        dropped."""
        self._sessionmaker = sessionmaker
        self._write = write
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Pending[I, R]] = asyncio.Queue(maxsize=queue_size)
        self._retry_after_s = queue_full_retry_after_s
        self._after_commit = after_commit
        self._isolate = isolate
        self._error = error
        self._write_abandoned = write_abandoned
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
            self._queue.put_nowait(_Pending(item, future))
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
                await self._commit_group(batch)
            finally:
                for _ in batch:
                    self._queue.task_done()
            # Let the callers just answered run and queue their next write, so that it
            # joins the next group instead of trailing it in a group of its own.
            await asyncio.sleep(0)

    async def _commit_group(self, batch: list[_Pending[I, R]]) -> None:
        if not self._write_abandoned:
            batch = [p for p in batch if not p.future.done()]  # its caller was cancelled
            if not batch:
                return
        try:
            results = await self._transaction([p.item for p in batch])
        except Exception as exc:
            if len(batch) == 1 or not self._isolate(exc):
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

    async def _transaction(self, items: list[I]) -> list[R]:
        async with self._sessionmaker() as session, session.begin():
            results = await self._write(session, items)
        self.commits += 1
        return results


def _fail(pending: _Pending[I, R], exc: BaseException) -> None:
    if not pending.future.done():
        pending.future.set_exception(exc)
