"""A pass that runs at start-up and then every `interval_s`, in a task of its own (the
reconciler, the approval sweep), or sooner when the pass knows work falls due before then
(`sooner`: the sprint clock). A pass that fails is logged, and the next one comes on time:
the database may just be away for a while."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Periodic:
    def __init__(
        self,
        name: str,
        run_once: Callable[[], Awaitable[object]],
        interval_s: float,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        sooner: Callable[[], float | None] = lambda: None,
    ) -> None:
        """`sooner()`, asked after each pass: in how many seconds the next pass is wanted,
        if before `interval_s` (None: not sooner)."""
        self.name = name
        self.interval_s = interval_s
        self._run_once = run_once
        self._sleep = sleep
        self._sooner = sooner
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self._run_once()
                delay_s = self.next_delay_s()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "%s: a pass failed; the next one comes in %gs", self.name, self.interval_s
                )
                delay_s = self.interval_s  # not sooner: what it knew may be what failed
            await self._sleep(delay_s)

    def next_delay_s(self) -> float:
        wanted = self._sooner()
        return self.interval_s if wanted is None else max(0.0, min(self.interval_s, wanted))
