"""Shutdown of a single-writer queue, shared by the TaskEngine and the group committer:
let what is queued commit within a timeout, stop the writer, fail what is left."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

from app.core.errors import ShuttingDown


class _Pending(Protocol):
    @property
    def future(self) -> asyncio.Future[Any]: ...


async def drain_and_stop(
    queue: asyncio.Queue[Any], writer: asyncio.Task[None], drain_timeout_s: float
) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(queue.join(), drain_timeout_s)
    writer.cancel()
    await asyncio.gather(writer, return_exceptions=True)
    while not queue.empty():
        pending: _Pending = queue.get_nowait()
        if not pending.future.done():
            pending.future.set_exception(ShuttingDown())
        queue.task_done()
