"""The review gate: a task that enters `in_review` gets a
`task_review` approval, and the approval's decision moves the task on.

It observes the TaskEngine; the observer only starts a task of its own, so the writer
never waits on it. `sync` is convergent: it asks the current round's review (idempotent)
and, when that review is already decided but the task still waits in review (a crash
between the decision and the task's move), applies the decision again. The approval
sweep calls `sweep` after a restart and on every tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.approvals.engine.approvals import ApprovalCommands
from app.core.states import ApprovalStatus, TaskStatus
from app.tasks.engine.task_engine import MutationResult, TaskEngine
from app.tasks.store import task_runs as task_run_store

log = logging.getLogger(__name__)

BATCH = 500


class ReviewGate:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        tasks: TaskEngine,
        approvals: ApprovalCommands,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._tasks = tasks
        self._approvals = approvals
        self._work: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._tasks.add_observer(self._on_task_change)

    async def stop(self) -> None:
        """Unfinished work is dropped; the next sweep does it again."""
        for job in list(self._work):
            job.cancel()
        for job in list(self._work):
            with contextlib.suppress(asyncio.CancelledError):
                await job

    async def _on_task_change(self, result: MutationResult) -> None:
        change = result.change
        if change is None:
            return
        before = change.before.status if change.before else None
        after = change.after.status if change.after else None
        if after is TaskStatus.IN_REVIEW:
            work: Awaitable[object] = self.sync(result.task.id)
        elif before is TaskStatus.IN_REVIEW:  # left review: by a decision, or by hand
            work = self._approvals.withdraw_review(result.task.id)
        else:
            return
        job = asyncio.create_task(_logged(work))
        self._work.add(job)
        job.add_done_callback(self._work.discard)

    async def sync(self, task_id: str) -> None:
        """Make sure a task in review has its review, and follows it once decided."""
        review = await self._approvals.request_review(task_id)
        if review is not None and review.status is not ApprovalStatus.PENDING:
            await self._approvals.settle_review(review)

    async def sweep(self) -> None:
        async with self._sessionmaker() as session:
            waiting = await task_run_store.tasks_in(session, [TaskStatus.IN_REVIEW], limit=BATCH)
        for task in waiting:
            await _logged(self.sync(task.id))


async def _logged(work: Awaitable[object]) -> None:
    """Gate work is best effort (the sweep repeats it): log a failure, never raise it."""
    try:
        await work
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("review gate step failed")
