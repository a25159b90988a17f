"""The reconciler: on boot and on a tick, it settles what no worker will (seed 000
"Checkpoints and Resume").

- A `running` run whose lease expired (its worker died or hung) becomes `timed_out`, with
  `resume_available` when its latest checkpoint is a resumable boundary (`input`,
  `llm_response`, `tool_result`, `compaction`, `journal_update`); with automatic resume on,
  such a run goes straight back to the head of its lane's queue.
- A `waiting_on_human` run whose cancel request is older than the cancel timeout is
  cancelled (its pending call is answered with an error, as a cancel would).

A time-out the run stays in is one of the run outcomes `/metrics` counts (after commit);
one requeued at once is not, as a retried failure is not: the run settles later.

Rows are taken with SKIP LOCKED, so reconcilers of several processes share the work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.engine.bus import EventBus
from app.engine.periodic import Periodic
from app.engine.runs import RUNS_STREAM, RunCommands, RunEvent, emit_many, run_stream
from app.metrics import Metrics
from app.observability import log_events
from app.schemas.runs import RunRead
from app.states import RunStatus
from app.store import checkpoints
from app.store import events as event_store
from app.store import runs as run_store

log = logging.getLogger(__name__)

RESUMABLE = frozenset({"input", "llm_response", "tool_result", "compaction", "journal_update"})

_EXPIRED = text(
    "SELECT id FROM runs WHERE status = 'running' AND lease_expires_at < now() "
    "ORDER BY seq LIMIT :limit FOR UPDATE SKIP LOCKED"
)
_CANCEL_OVERDUE = text(
    "SELECT id FROM runs WHERE status = 'waiting_on_human' AND cancel_requested "
    "AND cancel_requested_at < :before ORDER BY seq LIMIT :limit FOR UPDATE SKIP LOCKED"
)


@dataclass(frozen=True)
class ReconcileReport:
    timed_out: int
    resumed: int
    cancelled: int


class Reconciler:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        runs: RunCommands,
        *,
        interval_s: float = 300.0,
        auto_resume: bool = True,
        cancel_timeout_s: float = 180.0,
        batch: int = 500,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: Metrics | None = None,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._runs = runs
        self._metrics = metrics
        self.interval_s = interval_s
        self.auto_resume = auto_resume
        self.cancel_timeout_s = cancel_timeout_s
        self._batch = batch
        self._clock = clock
        self._ticks = Periodic("reconciler", self.run_once, interval_s)

    def start(self) -> None:
        """The first pass runs now (at start-up), then one every `interval_s`."""
        self._ticks.start()

    async def stop(self) -> None:
        await self._ticks.stop()

    async def run_once(self) -> ReconcileReport:
        now = self._clock()
        timed_out = resumed = 0
        committed: list[tuple[list[RunEvent], RunRead]] = []
        async with self._sessionmaker() as session, session.begin():
            expired = (await session.execute(_EXPIRED, {"limit": self._batch})).scalars().all()
            for run_id in expired:
                events, run = await self._time_out(session, run_id, now)
                committed.append((events, run))
                timed_out += 1
                resumed += run.status is RunStatus.QUEUED
        if self._metrics is not None:
            for events, run in committed:
                self._metrics.observe_run_events(events, run)
        cancelled = 0
        before = now - timedelta(seconds=self.cancel_timeout_s)
        async with self._sessionmaker() as session:
            overdue = (
                (await session.execute(_CANCEL_OVERDUE, {"before": before, "limit": self._batch}))
                .scalars()
                .all()
            )
        for run_id in overdue:
            await self._runs.cancel(run_id)  # answers the pending call and settles the run
            cancelled += 1
        report = ReconcileReport(timed_out, resumed, cancelled)
        log_events([("agent_run.reconcile", report.__dict__)])
        if timed_out or cancelled:  # on the runs board too, for dashboards
            async with self._sessionmaker() as session, session.begin():
                await event_store.append_events(
                    session,
                    RUNS_STREAM,
                    [event_store.NewEvent("agent_run.reconcile", report.__dict__)],
                    now,
                )
        if timed_out:
            for _, run in committed:  # followers of each run hear it now, not at their poll
                self._bus.publish(run_stream(run.id))
            self._bus.publish(RUNS_STREAM)
        return report

    async def _time_out(
        self, session: AsyncSession, run_id: str, now: datetime
    ) -> tuple[list[RunEvent], RunRead]:
        """The run's events and the run as they leave it: `timed_out`, or `queued` again."""
        run = await run_store.get_run(session, run_id)
        assert run is not None  # locked by the select
        latest = await checkpoints.latest(session, run_id)
        # No checkpoint: the worker died between its claim and the run's first boundary, so
        # nothing was done and starting over is safe (the seed would leave it to a human).
        resumable = latest is None or latest.kind in RESUMABLE
        changed = await run_store.update_run(
            session,
            run_id,
            read_version=run.version,
            values={
                "status": RunStatus.TIMED_OUT,
                "resume_available": resumable,
                "stop_reason": "heartbeat_lost",
                **run_store.finished(now),
            },
        )
        assert changed is not None
        timed_out: list[RunEvent] = [
            (
                "agent_run.timed_out",
                {"resume_available": resumable, "last_checkpoint": latest.kind if latest else None},
            )
        ]
        if not (resumable and self.auto_resume):
            await emit_many(session, [(changed, timed_out, now)])
            return timed_out, changed
        back = await run_store.update_run(
            session,
            run_id,
            read_version=changed.version,
            values={"status": RunStatus.QUEUED, "finished_at": None},
        )
        assert back is not None
        resume: list[RunEvent] = [("agent_run.resume", {"automatic": True})]
        await emit_many(session, [(changed, timed_out, now), (back, resume, now)])
        return timed_out + resume, back
