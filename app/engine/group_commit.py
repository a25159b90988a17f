"""Group commit: many callers' writes committed in one transaction.

Callers that reach a write at about the same time hand it to `submit()`; one writer task
takes whatever is queued, passes it to the batch `write` function inside a single
transaction and commits once, so the cost of a commit (a WAL flush, the round trips) is
shared. If the shared transaction fails, each item is retried in a transaction of its
own, so one failing item cannot sink the others: `write` must therefore only talk to the
session (it may run twice).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import ShuttingDown
from app.engine.writer_queue import drain_and_stop

log = logging.getLogger(__name__)

I = TypeVar("I")  # noqa: E741 - item
R = TypeVar("R")
BatchWrite = Callable[[AsyncSession, list[I]], Awaitable[list[R]]]


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
    ) -> None:
        self._sessionmaker = sessionmaker
        self._write = write
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Pending[I, R]] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self.commits = 0  # transactions committed (for benchmarks)

    def start(self) -> None:
        if self._writer is None:
            self._writer = asyncio.create_task(self._run(), name="group-committer")

    async def stop(self, drain_timeout_s: float = 10.0) -> None:
        if self._writer is None:
            return
        await drain_and_stop(self._queue, self._writer, drain_timeout_s)
        self._writer = None

    async def submit(self, item: I) -> R:
        if self._writer is None:
            raise ShuttingDown()
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Pending(item, future))
        return await future

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
            await asyncio.sleep(0)  # let the callers just answered queue their next write

    async def _commit_group(self, batch: list[_Pending[I, R]]) -> None:
        batch = [p for p in batch if not p.future.done()]  # its caller was cancelled
        if not batch:
            return
        try:
            results = await self._transaction([p.item for p in batch])
        except Exception as exc:
            if len(batch) == 1:
                _fail(batch[0], exc)
                return
            log.warning("group commit of %d failed (%s); retrying one by one", len(batch), exc)
            for pending in batch:
                try:
                    (result,) = await self._transaction([pending.item])
                except Exception as single:
                    _fail(pending, single)
                else:
                    _succeed(pending, result)
            return
        for pending, result in zip(batch, results, strict=True):
            _succeed(pending, result)

    async def _transaction(self, items: list[I]) -> list[R]:
        async with self._sessionmaker() as session, session.begin():
            results = await self._write(session, items)
        self.commits += 1
        return results


def _succeed(pending: _Pending[I, R], result: R) -> None:
    if not pending.future.done():
        pending.future.set_result(result)


def _fail(pending: _Pending[I, R], exc: BaseException) -> None:
    if not pending.future.done():
        pending.future.set_exception(exc)
