"""The approval sweep: on a tick, pending approvals
past their expiry get their timeout policy, and what a crash or a race left half done is
finished.

Each tick, in order:
1. expiry: `auto_approve` / `auto_deny` settle the approval `expired` with that decision,
   `escalate` keeps it pending with a new wait (see `ApprovalCommands.expire_due`);
2. reviews: every task in review has its review, and follows it once decided;
3. withdrawals: pending approvals whose task left review, or whose run ended, are cancelled;
4. releases: a run still waiting on an approval that was decided goes back to the queue.

Several processes may sweep at once: expiry locks with SKIP LOCKED, the other steps are
idempotent commands. The first tick runs at start-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.approvals import store
from app.approvals.engine.approvals import ApprovalCommands, ExpiryReport
from app.runtime.components import Loop, Wakes
from app.tasks.engine.review_gate import ReviewGate
from app.telemetry.logs import log_events

log = logging.getLogger(__name__)

BATCH = 500
STALE = "the task left review, or the run ended, before anyone decided"


class ApprovalTimeoutScheduler:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        approvals: ApprovalCommands,
        gate: ReviewGate,
        *,
        interval_s: float = 30.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._approvals = approvals
        self._gate = gate
        self.loop = Loop("approval-sweep", self.run_once, Wakes(interval_s), sleep=sleep)

    def start(self) -> None:
        """The first pass runs now (at start-up), then one every `interval_s`."""
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()

    async def run_once(self) -> ExpiryReport:
        report = await self._approvals.expire_due(limit=BATCH)
        await self._gate.sweep()
        async with self._sessionmaker() as session:
            stale = await store.stale_pending(session, limit=BATCH)
            answered = await store.answered_waits(session, limit=BATCH)
        for approval_id in stale:
            await self._approvals.cancel(approval_id, STALE)
        for run_id in answered:
            await self._approvals.release_answered(run_id)
        if report != ExpiryReport():
            log_events([("approval.sweep", report.__dict__)])
        return report
