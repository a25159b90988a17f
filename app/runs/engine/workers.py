"""The run workers of one process: claim runs whose lane is free, run their loops, keep
their leases alive.

    run()       wake on a queued run or a freed lane (bus, fed by NOTIFY), or a poll tick;
                claim up to the free capacity; start one named task per run
    heartbeat   every lease_ttl/3, renew the leases of the runs in hand in one statement;
                a run whose lease could not be renewed is told to stop at its next boundary;
                a lost database is retried with backoff while the leases' terms last
    stop()      stop claiming, give running loops `grace_s`, then cancel what is left and
                put those runs back in the queue (lease released, place in lane kept)
    lend_slot() a run that only waits (for its child runs) does not count against the
                capacity meanwhile: another run may be claimed into its slot; when the
                wait ends it goes on at once, so the pool may briefly hold more loops
                than `capacity` (no claim until it is back under)

Claiming is `FOR UPDATE SKIP LOCKED` on the head of each free lane, so several processes
share the work without coordination beyond Postgres.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.ids import new_id
from app.core.streams import RUNS_STREAM, StreamEvent
from app.db.outage import ride_out
from app.events.engine.bus import EventBus
from app.events.engine.published import published, run_written
from app.runs.engine import run_transitions
from app.runs.engine.leases import LeaseTerm
from app.runs.schemas.runs import RunRead
from app.runs.store import runs as run_store

log = logging.getLogger(__name__)


class RunDriver(Protocol):
    """What the pool needs of the loop that drives one claimed run (the agent loop
    implements it; the composition root hands the pool a factory of them)."""

    @property
    def run(self) -> RunRead: ...

    @property
    def token(self) -> int: ...  # the lease token the run was claimed with

    @property
    def lease_lost(self) -> asyncio.Event: ...  # set by the heartbeat: stop writing

    @property
    def stop_requested(self) -> asyncio.Event: ...  # set at shutdown: hand the run back

    async def execute(self) -> None: ...


# (claimed run, worker name, the lease's term as the worker reckons it)
LoopFactory = Callable[[RunRead, str, LeaseTerm], RunDriver]


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{new_id('w')[-8:]}"


class WorkerPool:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        loops: LoopFactory,
        *,
        capacity: int = 8,
        lease_ttl_s: float = 30.0,
        poll_interval_s: float = 2.0,
        owner: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock`: monotonic seconds, by which the worker reckons its leases' terms."""
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._loops = loops
        self.capacity = capacity
        self.lease_ttl_s = lease_ttl_s
        self.poll_interval_s = poll_interval_s
        self.owner = owner or worker_name()
        self._clock = clock
        self._active: dict[str, tuple[RunDriver, asyncio.Task[None]]] = {}
        self._terms: dict[str, LeaseTerm] = {}  # of the runs in hand
        self._lent: set[str] = set()  # runs in hand that lent their slot (see lend_slot)
        self._slot_lent = asyncio.Event()  # wakes run_until_idle when a slot is lent
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        self._freed = asyncio.Event()

    @property
    def in_hand(self) -> list[str]:
        return list(self._active)

    @property
    def free_capacity(self) -> int:
        """Slots a claim may fill: loops in hand count, except those lending their slot.
        Negative while runs that lent a slot are back and others run in their place."""
        return self.capacity - (len(self._active) - len(self._lent))

    @asynccontextmanager
    async def lend_slot(self, run_id: str) -> AsyncIterator[None]:
        """While the body runs, `run_id` (a run in hand that only waits, e.g. for its
        children) does not count against the capacity, and the claimer is woken to fill
        its slot at once. Its loop stays in hand: its lease is renewed, and `stop()`
        hands it back like any other. On exit it counts again, without waiting for a
        slot. A run this pool does not hold, or one already lending, changes nothing."""
        if run_id not in self._active or run_id in self._lent:
            yield
            return
        self._lent.add(run_id)
        self._freed.set()
        self._slot_lent.set()
        try:
            yield
        finally:
            self._lent.discard(run_id)

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._run(), name=f"workers:{self.owner}"),
            asyncio.create_task(self._heartbeat(), name=f"heartbeat:{self.owner}"),
        ]

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop claiming and ask every loop to hand its run back at its next boundary; after
        `grace_s`, cancel what is left and give those runs back too. Either way the runs
        are queued again, at the head of their lane, resumable at once by any worker."""
        self._stopping.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for loop, _ in self._active.values():
            loop.stop_requested.set()
        running = [task for _, task in self._active.values()]
        if running:
            log.info(
                "stopping: waiting up to %g s for %d run(s) to reach a boundary and go back "
                "to the queue: %s",
                grace_s,
                len(running),
                ", ".join(self._active),
            )
            await asyncio.wait(running, timeout=grace_s)
        leftover = dict(self._active)
        for _, task in leftover.values():
            task.cancel()
        await asyncio.gather(*(t for _, t in leftover.values()), return_exceptions=True)
        if leftover:
            await asyncio.shield(
                self._release([(i, loop.token) for i, (loop, _) in leftover.items()])
            )

    async def _release(self, leases: list[tuple[str, int]]) -> None:
        try:
            async with self._sessionmaker() as session, session.begin():
                released = await run_transitions.release(
                    session, owner=self.owner, leases=leases, now=datetime.now(UTC)
                )
        except (SQLAlchemyError, OSError):
            log.warning(
                "could not release %d runs at shutdown; their leases will expire", len(leases)
            )
            return
        interrupted: list[StreamEvent] = [("agent_run.interrupted", {"at_boundary": False})]
        published(self._bus, [run_written(run, interrupted, worker=self.owner) for run in released])

    async def run_until_idle(self) -> None:
        """Drain mode for tests and tools: claim and run until no lane has work. Claims
        again once every loop in hand has ended, or as soon as one lends its slot."""
        while True:
            self._slot_lent.clear()
            claimed = await self.claim()
            if not claimed and not self._active:
                return
            pending = {task for _, task in self._active.values()}
            lent = asyncio.create_task(self._slot_lent.wait())
            try:
                while pending and not lent.done():
                    await asyncio.wait({*pending, lent}, return_when=asyncio.FIRST_COMPLETED)
                    pending = {task for task in pending if not task.done()}
            finally:
                lent.cancel()

    # -- claiming --------------------------------------------------------------------

    async def _run(self) -> None:
        with self._bus.subscribe(RUNS_STREAM) as wake:
            while not self._stopping.is_set():
                self._freed.clear()  # before claiming: a slot freed meanwhile wakes us again
                claimed = await self.claim()
                if claimed and self.free_capacity > 0:
                    continue  # there may be more
                waits = [asyncio.create_task(wake.wait(self.poll_interval_s))]
                waits.append(asyncio.create_task(self._freed.wait()))
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for waiting in waits:
                    waiting.cancel()

    async def claim(self) -> list[RunRead]:
        free = self.free_capacity
        if free <= 0 or self._stopping.is_set():
            return []
        sent_at = self._clock()
        try:
            async with self._sessionmaker() as session, session.begin():
                runs = await run_transitions.claim(
                    session, owner=self.owner, limit=free, ttl_s=self.lease_ttl_s
                )
        except IntegrityError:
            return []  # another claimer took the same lane first; the index said no
        except (SQLAlchemyError, OSError) as exc:
            # A failed claim is an event: logged, and the lanes are not blocked (the next
            # wake-up or poll claims again).
            event = "agent_run.dispatch_next_failed"
            error = f"{type(exc).__name__}: {exc}"
            log.warning(
                event, extra={"fields": {"event": event, "worker": self.owner, "error": error}}
            )
            return []
        for run in runs:
            term = self._terms[run.id] = LeaseTerm(
                self.lease_ttl_s, sent_at=sent_at, clock=self._clock
            )
            loop = self._loops(run, self.owner, term)
            task = asyncio.create_task(self._execute(loop), name=f"run:{run.id}")
            self._active[run.id] = (loop, task)
        return runs

    async def _execute(self, loop: RunDriver) -> None:
        try:
            await loop.execute()
        finally:
            self._active.pop(loop.run.id, None)
            self._terms.pop(loop.run.id, None)
            self._lent.discard(loop.run.id)
            self._freed.set()

    # -- leases ----------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_ttl_s / 3)
            with contextlib.suppress(SQLAlchemyError, OSError):
                await self.renew()

    async def renew(self) -> None:
        """Extend the leases of the runs in hand. A lost database is tried again with
        backoff while any of their terms lasts (then the error is raised: the worker gives
        up on them as the leases expire); a run whose lease was not renewed (another worker
        holds it, or it left `running`) is told to stop writing."""
        terms = {run_id: self._terms[run_id] for run_id in self._active}
        leases = [(run_id, loop.token) for run_id, (loop, _) in self._active.items()]
        if not leases:
            return
        sent_at = self._clock()

        async def attempt() -> set[str]:
            nonlocal sent_at
            sent_at = self._clock()
            async with self._sessionmaker() as session, session.begin():
                return await run_store.renew_leases(
                    session, owner=self.owner, leases=leases, ttl_s=self.lease_ttl_s
                )

        renewed = await ride_out(
            attempt, until=lambda: max(t.held_until for t in terms.values()), clock=self._clock
        )
        for run_id, term in terms.items():
            if run_id in renewed:
                term.renewed(sent_at)
                continue
            entry = self._active.get(run_id)
            if entry is not None and entry[0].run.status == "running":
                entry[0].lease_lost.set()
