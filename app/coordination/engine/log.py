"""What a coordination records: each phase's result (moving it on or settling it) and the
events of its stream, each in one transaction, heard after the commit."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.coordination import store
from app.coordination.schemas import CoordinationRead, PhaseResult
from app.core.states import ExecutionStatus
from app.core.streams import coordination_stream
from app.core.vocabulary import CoordinationPhase, PhaseOutcome
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published
from app.telemetry.metrics import Metrics


class Waiting(Exception):
    """The phase cannot finish yet: subtasks or runs are still working."""


class CoordinationLog:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        clock: Callable[[], datetime],
        metrics: Metrics | None,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._clock = clock
        self._metrics = metrics

    async def record(
        self,
        c: CoordinationRead,
        phase_outcome: PhaseOutcome,
        detail: str,
        *,
        next_phase: CoordinationPhase | None = None,
        status: ExecutionStatus | None = None,
        **fields: Any,
    ) -> None:
        """Record the phase's result (and move on or settle) with its events, in one
        transaction; stale when another coordinator recorded it first. The phase lasted
        from the end of the one before (the coordination's start for the first) until
        now: a dispatch includes its subtasks' work and reviews, and a phase resumed after
        a crash the time no coordinator ran."""
        now = self._clock()
        began = c.phase_results[-1].finished_at if c.phase_results else c.created_at
        duration_ms = max(0, round((now - began).total_seconds() * 1000))
        result = PhaseResult(
            phase=c.phase,
            outcome=phase_outcome,
            duration_ms=duration_ms,
            detail=detail[:2000],
            finished_at=now,
        )
        async with self._sessionmaker.begin() as session:
            moved = await store.record_phase(
                session, c.id, result, at=c.phase, next_phase=next_phase, status=status, **fields
            )
            await self.append(
                session, c, "coordination.phase.completed", result.model_dump(mode="json")
            )
            if status is not None:
                settled = {"status": status.value, "outcome": moved.outcome, "reason": moved.reason}
                await self.append(session, c, f"coordination.{status.value}", settled)
        self.heard(c)
        if self._metrics is not None:
            self._metrics.coordination_phase(c.phase.value, phase_outcome.value, duration_ms / 1000)
            if status is not None:
                self._metrics.coordination_settled(status.value)

    async def event(self, c: CoordinationRead, kind: str, data: dict[str, Any]) -> None:
        """One event of the coordination's stream, in a transaction of its own."""
        async with self._sessionmaker.begin() as session:
            await self.append(session, c, kind, data)
        self.heard(c)

    async def append(
        self, session: AsyncSession, c: CoordinationRead, kind: str, data: dict[str, Any]
    ) -> None:
        """An event in the caller's transaction; call `heard` once it committed."""
        event = event_store.NewEvent(kind, {"coordination_id": c.id, **data})
        await event_store.append_events(session, coordination_stream(c.id), [event], self._clock())

    def heard(self, c: CoordinationRead) -> None:
        """After a commit: the coordination's readers are woken."""
        published(self._bus, [Written(coordination_stream(c.id))])
