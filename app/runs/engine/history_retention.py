"""History retention: on a tick, delete the history of conversations that settled longer
ago than the window (`HistorySettings.retention_s`; off by default: history is kept
forever, and this component is not even built).

The rule: history is pruned by conversation, never by run, because a conversation's
transcript is the history of all its runs and the next run on it reads all of it. A
conversation is pruned when
- every run of it is settled with its transcript closed: `completed`, `cancelled`,
  `failed` or `dead_letter` (`runs/store/history_retention.PRUNABLE`), and
- the latest `finished_at` of its runs is older than now - retention (the clock is
  injected);
and then all its steps go (transcript, checkpoints, tool-call ledger, the runs' events),
with its compacted context; its runs rows stay, so `GET /v1/runs/{id}` reads each run as
it settled, with an empty transcript and stream.

So a conversation with a live run keeps everything, whatever the age of its other runs:
`queued` (a run continuing it included), `running`, `waiting_on_human`, and `timed_out`.
A timed-out run is settled (`RUN_SETTLED`) but not closed: its worker died mid-step, and a
resume or retry continues from its checkpoint and tool-call ledger, which is its history;
without them it would start over and could repeat a side effect it may already have had,
where with them it halts for a person. It stays until a person resumes or retries it and
it settles otherwise. A failed or dead-lettered run closed its transcript when it
settled; a retry after pruning starts it over from its input, in an emptied conversation.

A continuation never finds half a transcript: each conversation is pruned whole, in one
transaction, under locks that make a run created or sent back to the queue meanwhile
either keep the conversation or wait for the prune to commit (`runs/store/history_retention.py`
says how); a run created after the prune finds an empty conversation and starts it anew.

Each pass walks the conversations in id order, `chunk` conversations per transaction,
until none is left; several processes may prune at once (SKIP LOCKED). The first pass
runs at start-up. The steps and conversations pruned are counted on `/metrics`
(`loopwright_history_steps_pruned_total`, `loopwright_history_conversations_pruned_total`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.runs.store import history_retention
from app.runtime.components import Loop, Wakes
from app.telemetry.logs import log_events
from app.telemetry.metrics import Metrics

CHUNK = 100


class HistoryRetention:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        retention: timedelta,
        interval_s: float = 3_600.0,
        chunk: int = CHUNK,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        metrics: Metrics | None = None,
    ) -> None:
        if chunk < 1:
            raise ValueError("chunk must be at least 1")
        if retention <= timedelta(0):
            raise ValueError("retention must be positive")
        self._sessionmaker = sessionmaker
        self._retention = retention
        self._chunk = chunk
        self._clock = clock
        self._metrics = metrics
        self.loop = Loop(
            "history-retention", self.run_once, Wakes(interval_s), sleep=sleep, clock=clock
        )

    def start(self) -> None:
        """The first pass runs now (at start-up), then one every `interval_s`."""
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()

    async def run_once(self) -> int:
        """Prune every conversation that settled before this pass's start minus the
        window; the number of steps deleted."""
        cutoff = self._clock() - self._retention
        after = ""
        conversations = steps = 0
        while True:
            async with self._sessionmaker() as session, session.begin():
                chunk = await history_retention.prune_chunk(
                    session, cutoff, after=after, limit=self._chunk
                )
            conversations += chunk.conversations
            steps += chunk.steps
            if self._metrics is not None:  # after the commit: a rolled-back prune did not happen
                self._metrics.history_steps_pruned.inc(chunk.steps)
                self._metrics.history_conversations_pruned.inc(chunk.conversations)
            if chunk.picked < self._chunk or chunk.last is None:
                break
            after = chunk.last
        if conversations:
            log_events([("history.pruned", {"conversations": conversations, "steps": steps})])
        return steps
