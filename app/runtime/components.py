"""A background component, written once: what wakes it (bus streams, an interval, a
`sooner`, its own code through `wake()`), an optional start-up step and one pass. `Loop`
runs it in a task of its own and supervises it: a pass that raises is logged and the next
comes on time (the database may just be away for a while); anything else that escapes
(the start-up step, a wake-up) ends the loop, which is logged, counted and started again
after a capped exponential backoff. Each loop records when it last completed a pass, so a
component that stops making passes reads as stalled (`Reading.stalled`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

log = logging.getLogger(__name__)

# A loop that completed no pass for this many of its intervals (and at least
# `STALL_FLOOR_S`: a short interval with a long pass is not a stall) has stalled.
STALL_INTERVALS = 3
STALL_FLOOR_S = 60.0


class Wakeable(Protocol):
    """One reader's wake-up flag (`app.events.engine.bus.Subscription`)."""

    async def wait(self, timeout_s: float) -> bool: ...


class Bus(Protocol):
    """What wakes a loop on its streams (`app.events.engine.bus.EventBus`)."""

    def subscribe(self, stream: str) -> AbstractContextManager[Wakeable]: ...


@dataclass(frozen=True)
class Wakes:
    """What wakes a component: an event on any of `streams`, else `interval_s` after its
    last pass, or sooner when `sooner()` (asked after each pass) wants the next one in
    fewer seconds (None: not sooner)."""

    interval_s: float
    streams: tuple[str, ...] = ()
    sooner: Callable[[], float | None] | None = None

    def delay_s(self) -> float:
        wanted = self.sooner() if self.sooner is not None else None
        return self.interval_s if wanted is None else max(0.0, min(self.interval_s, wanted))


@dataclass(frozen=True)
class RestartPolicy:
    """How long a loop that died waits before it starts again: `base_delay_s`, doubled at
    each restart in a row, at most `max_delay_s`; a completed pass resets the row."""

    base_delay_s: float = 1.0
    max_delay_s: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.base_delay_s <= self.max_delay_s:
            raise ValueError("need 0 < base_delay_s <= max_delay_s")

    def delay_s(self, in_a_row: int) -> float:
        """The wait before restart number `in_a_row` (1 for the first) of a row."""
        return min(self.max_delay_s, self.base_delay_s * 2.0 ** max(0, in_a_row - 1))


class ComponentState(StrEnum):
    STOPPED = "stopped"  # not started, or stopped
    RUNNING = "running"  # its loop runs (in a pass, or waiting for a wake-up)
    RESTARTING = "restarting"  # its loop died; it starts again after its backoff


@dataclass(frozen=True)
class Reading:
    """A component as `/readyz` and the overview show it."""

    name: str
    state: ComponentState
    last_pass: datetime | None  # when it last completed a pass; None: not yet
    restarts: int  # since this process started
    stalled: bool  # running, but no pass for several of its intervals


class Loop:
    """Runs `run_pass` at start (after `start_up`, if any), then at every wake-up of
    `wakes` (on `bus`), until stopped. `sleep` and `clock` are injectable: the interval
    and the restart backoff are slept with `sleep`, so a test decides when they end."""

    def __init__(
        self,
        name: str,
        run_pass: Callable[[], Awaitable[object]],
        wakes: Wakes,
        *,
        bus: Bus | None = None,
        start_up: Callable[[], Awaitable[object]] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        restart: RestartPolicy = RestartPolicy(),
    ) -> None:
        if wakes.streams and bus is None:
            raise ValueError(f"{name}: streams wake a loop only through a bus")
        self.name = name
        self.wakes = wakes
        self._run_pass = run_pass
        self._bus = bus
        self._start_up = start_up
        self._sleep = sleep
        self._clock = clock
        self._restart = restart
        self._task: asyncio.Task[None] | None = None
        self._state = ComponentState.STOPPED
        self._since = clock()  # when it last started, or restarted
        self._last_pass: datetime | None = None
        self._restarts = 0
        self._in_a_row = 0
        self._woken = asyncio.Event()

    def start(self) -> None:
        self._state = ComponentState.RUNNING
        self._since = self._clock()
        self._task = asyncio.create_task(self._supervise(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._state = ComponentState.STOPPED

    def wake(self) -> None:
        """A pass soon, as an event on its streams would (the component's own code knows
        of work: a TaskEngine observer). Wake-ups during a pass collapse into one."""
        self._woken.set()

    def reading(self) -> Reading:
        return Reading(self.name, self._state, self._last_pass, self._restarts, self.stalled())

    def stalled(self) -> bool:
        if self._state is not ComponentState.RUNNING:
            return False
        quiet_s = (self._clock() - (self._last_pass or self._since)).total_seconds()
        return quiet_s > max(STALL_FLOOR_S, STALL_INTERVALS * self.wakes.interval_s)

    async def _supervise(self) -> None:
        while True:
            try:
                await self._run()
            except Exception:
                self._restarts += 1
                self._in_a_row += 1
                delay_s = self._restart.delay_s(self._in_a_row)
                self._state = ComponentState.RESTARTING
                log.exception("%s: its loop died; it starts again in %gs", self.name, delay_s)
                await self._sleep(delay_s)
                self._state = ComponentState.RUNNING
                self._since = self._clock()

    async def _run(self) -> None:
        if self._start_up is not None:
            await self._start_up()
        bus, streams = self._bus, self.wakes.streams
        with contextlib.ExitStack() as stack:
            wakes = [stack.enter_context(bus.subscribe(s)) for s in streams] if bus else []
            while True:
                delay_s = await self._one_pass()
                await self._wait(wakes, delay_s)

    async def _one_pass(self) -> float:
        """One pass; the delay until the next, unless a wake-up comes first."""
        try:
            await self._run_pass()
            self._last_pass = self._clock()
            self._in_a_row = 0
            return self.wakes.delay_s()
        except Exception:
            log.exception(
                "%s: a pass failed; the next one comes in %gs", self.name, self.wakes.interval_s
            )
            return self.wakes.interval_s  # not sooner: what it knew may be what failed

    async def _wait(self, wakes: list[Wakeable], delay_s: float) -> None:
        """Until the first of: an event on a stream, `wake()`, `delay_s` slept."""
        waits: list[asyncio.Future[object]] = [asyncio.ensure_future(self._sleep(delay_s))]
        waits.append(asyncio.ensure_future(self._woken.wait()))
        waits += [asyncio.ensure_future(w.wait(delay_s)) for w in wakes]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        self._woken.clear()
