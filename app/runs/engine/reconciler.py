"""The reconciler: on boot and on a tick, it settles what no worker will: runs whose
worker is gone, and cancels nobody answers.

- A `running` run whose lease expired (its worker died or hung) becomes `timed_out`, and
  its error log gets a `heartbeat_lost` entry saying what the reconciler did with it.
  `resume_available` is set when its latest checkpoint is a resumable boundary (`input`,
  `llm_response`, `tool_result`, `compaction`, `journal_update`) and also when it has no
  checkpoint at all: its worker died between the claim and the first boundary, so nothing
  was done and starting over is safe, and no person needs to look at it first.
- With automatic resume on, a resumable run goes straight back to the head of its lane's
  queue, at most `max_resume_attempts` times over its life (2 by default):
  a run that kills or hangs every worker that takes it (a poison input, a tool that runs
  the process out of memory) would otherwise be requeued forever. Past the cap it stays
  `timed_out` with `resume_available` (a person may still resume it) and an
  `agent_run.resume_exhausted` event. The count is read from the error log (entries
  `heartbeat_lost` whose `resume` is `automatic`), so resumes a person asked for, and
  time-outs with automatic resume off, never use up the budget.
- A `waiting_on_human` run whose cancel request is older than the cancel timeout is
  cancelled (its pending call is answered with an error, as a cancel would).

A time-out the run stays in (given up on included) is one of the run outcomes `/metrics`
counts (after commit); one requeued at once is not, as a retried failure is not: the run
settles later.

Rows are taken with SKIP LOCKED, so reconcilers of several processes share the work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.states import ResumeDecision, RunStatus, StopReason
from app.core.streams import RUNS_STREAM, StreamEvent
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published, run_written
from app.runs.engine import run_transitions
from app.runs.engine.runs import RunCommands
from app.runs.schemas.runs import ErrorLogEntry, RunRead, logged
from app.runs.store import history
from app.runs.store import runs as run_store
from app.runtime.components import Loop, Wakes
from app.telemetry.logs import log_events
from app.telemetry.metrics import Metrics

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
    resume_exhausted: int


def automatic_resumes(error_log: list[ErrorLogEntry]) -> int:
    """How many times the reconciler has requeued this run on its own."""
    return sum(
        1
        for e in error_log
        if e.code is StopReason.HEARTBEAT_LOST and e.resume is ResumeDecision.AUTOMATIC
    )


class Reconciler:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        runs: RunCommands,
        *,
        interval_s: float = 300.0,
        auto_resume: bool = True,
        max_resume_attempts: int = 2,
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
        if max_resume_attempts < 0:
            raise ValueError("max_resume_attempts must be >= 0")
        self.max_resume_attempts = max_resume_attempts
        self.cancel_timeout_s = cancel_timeout_s
        self._batch = batch
        self._clock = clock
        self.loop = Loop("reconciler", self.run_once, Wakes(interval_s), clock=clock)

    def start(self) -> None:
        """The first pass runs now (at start-up), then one every `interval_s`."""
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()

    async def run_once(self) -> ReconcileReport:
        now = self._clock()
        timed_out = resumed = exhausted = 0
        committed: list[tuple[list[StreamEvent], RunRead]] = []
        async with self._sessionmaker() as session, session.begin():
            expired = (await session.execute(_EXPIRED, {"limit": self._batch})).scalars().all()
            for run_id in expired:
                events, run = await self._time_out(session, run_id, now)
                committed.append((events, run))
                timed_out += 1
                resumed += run.status is RunStatus.QUEUED
                exhausted += any(kind == "agent_run.resume_exhausted" for kind, _ in events)
        written = [run_written(run, events) for events, run in committed]
        published(self._bus, written, metrics=self._metrics)  # committed: now they happened
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
        report = ReconcileReport(timed_out, resumed, cancelled, exhausted)
        log_events([("agent_run.reconcile", report.__dict__)])
        if timed_out or cancelled:  # on the runs board too, for dashboards
            async with self._sessionmaker() as session, session.begin():
                await event_store.append_events(
                    session,
                    RUNS_STREAM,
                    [event_store.NewEvent("agent_run.reconcile", report.__dict__)],
                    now,
                )
            published(self._bus, [Written(RUNS_STREAM)])
        return report

    async def _time_out(
        self, session: AsyncSession, run_id: str, now: datetime
    ) -> tuple[list[StreamEvent], RunRead]:
        """The run's events and the run as they leave it: `timed_out`, or `queued` again."""
        run = await run_store.get_run(session, run_id)
        assert run is not None  # locked by the select
        return await self.time_out(session, run, now)

    async def time_out(
        self, session: AsyncSession, run: RunRead, now: datetime
    ) -> tuple[list[StreamEvent], RunRead]:
        """Time out `run` (locked by this transaction), whose worker stopped renewing its
        lease: `invalid_transition` unless it is running."""
        run_id = run.id
        checkpoint = await history.checkpoint(session, run_id)
        last_kind = checkpoint.kind.value if checkpoint.kind else None
        # No checkpoint: the worker died between its claim and the run's first boundary, so
        # nothing was done and starting over is safe, with no person deciding first.
        resumable = last_kind is None or last_kind in RESUMABLE
        # The counters its worker left in the history go on the row as it settles.
        counters = (
            {"iteration": checkpoint.iteration, "usage": checkpoint.usage}
            if checkpoint.iteration is not None
            else {}
        )
        resumes = automatic_resumes(run.error_log)
        if not resumable:
            decision = ResumeDecision.UNAVAILABLE
        elif not self.auto_resume:
            decision = ResumeDecision.DISABLED
        elif resumes >= self.max_resume_attempts:
            decision = ResumeDecision.EXHAUSTED  # it took down every worker: a person decides
        else:
            decision = ResumeDecision.AUTOMATIC
        # The entry is both the counter of automatic resumes and what a person reads on
        # the run: which attempt lost its worker, where it stood, and what followed.
        entry = ErrorLogEntry(
            attempt=run.attempt,
            code=StopReason.HEARTBEAT_LOST,
            message="the worker stopped renewing the run's lease (it died or hung)",
            last_checkpoint=last_kind,
            resume=decision,
            at=now,
        )
        events: list[StreamEvent] = [
            (
                "agent_run.timed_out",
                {"resume_available": resumable, "last_checkpoint": last_kind},
            )
        ]
        if decision is ResumeDecision.EXHAUSTED:
            gave_up = {
                "automatic_resumes": resumes,
                "max_resume_attempts": self.max_resume_attempts,
            }
            events.append(("agent_run.resume_exhausted", gave_up))
        changed = await run_transitions.move(
            session,
            run,
            RunStatus.TIMED_OUT,
            now,
            events=events,
            values={
                "resume_available": resumable,
                "stop_reason": StopReason.HEARTBEAT_LOST,
                "error_log": logged(run, entry),
                **counters,
                **run_store.finished(now),
            },
        )
        if decision is not ResumeDecision.AUTOMATIC:
            return events, changed
        resume: list[StreamEvent] = [
            ("agent_run.resume", {"automatic": True, "automatic_resumes": resumes + 1})
        ]
        back = await run_transitions.move(
            session, changed, RunStatus.QUEUED, now, events=resume, values={"finished_at": None}
        )
        return events + resume, back
