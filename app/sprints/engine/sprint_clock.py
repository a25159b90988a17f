"""The sprint clock: moves an `active` sprint with `auto_transition` to `in_review` once its
end date is past. Nothing else moves by itself: the clock never starts, reviews or
completes a sprint, and never creates the next one.

A sprint's end date is its last day, included, in UTC (there is no time zone of a
project): the clock moves it at 00:00 UTC of the day after. A pass reads the due sprints
with their versions, then moves each through `SprintCommands.transition` as
`system:sprint_clock`, expecting the version it read, so the move is a person's move in
every way (the check of the lifecycle, the version bump, the `sprint.transitioned` event)
and the compare-and-set decides every race (docs/architecture.md, "who wins"): of two
clocks (two processes), or a clock and a person, the first to lock the sprint's row moves
it, and the other is refused and leaves it. One move, one event.

The clock wakes at the next end date of an active clocked sprint, or after `interval_s`,
whichever comes first; a sprint activated or switched to `auto_transition` between passes
is seen by the next one. The first pass runs at start-up, so sprints that fell due while
no process ran are moved then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import InvalidTransition, NotFound, VersionConflict
from app.core.states import SprintStatus
from app.db.errors import is_connectivity_error
from app.runtime.components import Loop, Wakes
from app.sprints.engine.sprints import SprintCommands
from app.sprints.store import sprints as store
from app.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

CLOCK_ACTOR = "system:sprint_clock"
BATCH = 100


def due_at(end_date: date) -> datetime:
    """When a sprint whose last day is `end_date` is over: the next day's 00:00 UTC."""
    return datetime.combine(end_date + timedelta(days=1), time(), tzinfo=UTC)


@dataclass(frozen=True)
class ClockPass:
    """What one pass did: the sprints it moved to `in_review`, and when the next active
    clocked sprint falls due (None: none is active)."""

    moved: list[str] = field(default_factory=list)
    next_due_at: datetime | None = None


class SprintClock:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        sprints: SprintCommands,
        *,
        interval_s: float = 60.0,
        batch: int = BATCH,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        metrics: Metrics | None = None,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._sprints = sprints
        self._batch = batch
        self._clock = clock
        self._metrics = metrics
        self._next_due_at: datetime | None = None
        self.loop = Loop(
            "sprint-clock",
            self.run_once,
            Wakes(interval_s, sooner=self._until_next_due),
            sleep=sleep,
            clock=clock,
        )

    def start(self) -> None:
        """The first pass runs now (at start-up), then at each end date or `interval_s`."""
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()

    async def run_once(self) -> ClockPass:
        """Move what is due now to `in_review`."""
        today = self._clock().astimezone(UTC).date()
        async with self._sessionmaker() as session:
            due = await store.clock_due(session, today, limit=self._batch)
            next_end = await store.next_clocked_end(session, today)
        moved = [sprint_id for sprint_id, version in due if await self._move(sprint_id, version)]
        self._next_due_at = None if next_end is None else due_at(next_end)
        # A full batch that moved: more may be due already, so the next pass comes at once.
        if len(due) == self._batch and moved:
            self._next_due_at = self._clock()
        return ClockPass(moved, self._next_due_at)

    async def _move(self, sprint_id: str, version: int) -> bool:
        """True when this pass moved it; False when someone else changed it first (the
        next pass reads it again) or its move failed (logged; the next pass tries again)."""
        try:
            await self._sprints.transition(
                sprint_id, SprintStatus.IN_REVIEW, CLOCK_ACTOR, expected_version=version
            )
        except (VersionConflict, InvalidTransition, NotFound):
            return False
        except Exception as exc:
            if is_connectivity_error(exc):
                raise  # the pass ends; its loop logs it and the next comes on time
            log.exception(
                "sprint %s was not moved to in_review; the next pass tries again",
                sprint_id,
                extra={"fields": {"sprint_id": sprint_id}},
            )
            return False
        log.info(
            "sprint %s moved to in_review: its end date is past",
            sprint_id,
            extra={"fields": {"sprint_id": sprint_id, "actor": CLOCK_ACTOR}},
        )
        if self._metrics is not None:
            self._metrics.sprints_auto_transitioned.inc()
        return True

    def _until_next_due(self) -> float | None:
        if self._next_due_at is None:
            return None
        return (self._next_due_at - self._clock()).total_seconds()
