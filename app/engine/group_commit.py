"""Group commit for run boundaries: many runs' short transactions committed as one.

Runs that reach a boundary at about the same time hand their write to `submit()`; one
writer task runs whatever is queued inside a single transaction and commits once, so the
cost of a commit (a WAL flush) is shared. If the shared transaction fails, every write of
it is retried in a transaction of its own, so one failing write (a lost lease, a bad row)
cannot sink the others. Work functions must therefore be safe to run twice: they read
and write through the session only and change no caller state until `submit` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.errors import ShuttingDown

log = logging.getLogger(__name__)

T = TypeVar("T")
Work = Callable[[AsyncSession], Awaitable[T]]


@dataclass
class _Pending:
    work: Work[Any]
    future: asyncio.Future[Any]


class GroupCommitter:
    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], *, max_batch: int = 256
    ) -> None:
        self._sessionmaker = sessionmaker
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self.commits = 0  # transactions committed (for benchmarks)

    def start(self) -> None:
        if self._writer is None:
            self._writer = asyncio.create_task(self._run(), name="group-committer")

    async def stop(self, drain_timeout_s: float = 10.0) -> None:
        if self._writer is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), drain_timeout_s)
        self._writer.cancel()
        await asyncio.gather(self._writer, return_exceptions=True)
        self._writer = None
        while not self._queue.empty():
            pending = self._queue.get_nowait()
            if not pending.future.done():
                pending.future.set_exception(ShuttingDown())
            self._queue.task_done()

    async def submit(self, work: Work[T]) -> T:
        if self._writer is None:
            raise ShuttingDown()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Pending(work, future))
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

    async def _commit_group(self, batch: list[_Pending]) -> None:
        batch = [p for p in batch if not p.future.done()]  # its caller was cancelled
        if not batch:
            return
        try:
            results = await self._transaction([p.work for p in batch])
        except Exception as exc:
            if len(batch) == 1:
                _resolve(batch[0], exc=exc)
                return
            for pending in batch:
                try:
                    (result,) = await self._transaction([pending.work])
                except Exception as single:
                    _resolve(pending, exc=single)
                else:
                    _resolve(pending, result=result)
            return
        for pending, result in zip(batch, results, strict=True):
            _resolve(pending, result=result)

    async def _transaction(self, works: list[Work[Any]]) -> list[Any]:
        async with self._sessionmaker() as session, session.begin():
            results = [await work(session) for work in works]
        self.commits += 1
        return results


def _resolve(pending: _Pending, *, result: Any = None, exc: BaseException | None = None) -> None:
    if pending.future.done():
        return
    if exc is not None:
        pending.future.set_exception(exc)
    else:
        pending.future.set_result(result)
