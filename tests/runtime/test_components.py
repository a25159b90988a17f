"""The wake loop every background component runs, on an injected sleep and clock: a pass
that raises is logged and the next comes on its interval (no restart); `sooner` brings the
next pass forward; a loop that dies restarts after a capped exponential backoff; a loop
with no pass for several intervals reads as stalled, and the watchdog logs it once."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest

from app.runtime.components import STALL_INTERVALS, ComponentState, Loop, RestartPolicy, Wakes
from app.runtime.lifecycle import Component, Components

SAFETY_S = 10
START = datetime(2026, 11, 1, tzinfo=UTC)


class Sleeps:
    """Each sleep is recorded and ends at once, until `hold` of them were asked: then it
    lasts until the test stops the loop."""

    def __init__(self, hold: int) -> None:
        self.asked: list[float] = []
        self.held = asyncio.Event()
        self._hold = hold

    async def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        if len(self.asked) >= self._hold:
            self.held.set()
            await asyncio.Event().wait()
        await asyncio.sleep(0)


async def _run_until_held(loop: Loop, sleeps: Sleeps) -> None:
    loop.start()
    try:
        async with asyncio.timeout(SAFETY_S):
            await sleeps.held.wait()
    finally:
        await loop.stop()


@pytest.mark.parametrize(
    ("in_a_row", "delay_s"), [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 5.0), (9, 5.0)]
)
def test_the_backoff_doubles_up_to_its_cap(in_a_row: int, delay_s: float) -> None:
    assert RestartPolicy(base_delay_s=0.5, max_delay_s=5.0).delay_s(in_a_row) == delay_s


def test_a_backoff_needs_a_positive_base_under_its_cap() -> None:
    with pytest.raises(ValueError, match="base_delay_s"):
        RestartPolicy(base_delay_s=10, max_delay_s=5)


def test_streams_wake_a_loop_only_through_a_bus() -> None:
    async def nothing() -> None: ...

    with pytest.raises(ValueError, match="through a bus"):
        Loop("lonely", nothing, Wakes(1.0, streams=("tasks",)))


async def test_a_pass_that_raises_is_logged_and_the_next_comes_on_its_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    passes: list[int] = []

    async def flaky() -> None:
        passes.append(len(passes))
        if len(passes) == 1:
            raise ConnectionError("the database is away")

    sleeps = Sleeps(hold=2)
    loop = Loop("flaky", flaky, Wakes(30.0, sooner=lambda: 5.0), sleep=sleeps.sleep)
    await _run_until_held(loop, sleeps)

    assert passes == [0, 1]
    assert sleeps.asked == [30.0, 5.0]  # after a failure, not sooner: what it knew failed
    assert loop.reading().restarts == 0
    assert "flaky: a pass failed; the next one comes in 30s" in caplog.text


async def test_its_own_code_wakes_a_loop_before_its_interval() -> None:
    passes = asyncio.Queue[int]()

    async def one_pass() -> None:
        passes.put_nowait(passes.qsize())

    async def forever(seconds: float) -> None:
        await asyncio.Event().wait()  # the interval never ends here

    loop = Loop("nudged", one_pass, Wakes(3_600.0), sleep=forever)
    loop.start()
    try:
        async with asyncio.timeout(SAFETY_S):
            await passes.get()  # at start
            loop.wake()
            await passes.get()  # woken
            loop.wake()
            loop.wake()  # wake-ups before the pass collapse into one
            await passes.get()
        for _ in range(10):  # turns of the event loop: a fourth pass would have come
            await asyncio.sleep(0)
        assert passes.empty()
    finally:
        await loop.stop()


async def test_a_loop_that_dies_restarts_after_a_growing_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    start_ups = 0

    async def start_up() -> None:
        nonlocal start_ups
        start_ups += 1
        if start_ups <= 3:
            raise RuntimeError(f"start-up {start_ups} failed")

    passes = 0

    async def one_pass() -> None:
        nonlocal passes
        passes += 1

    sleeps = Sleeps(hold=4)
    loop = Loop(
        "fragile",
        one_pass,
        Wakes(60.0),
        start_up=start_up,
        sleep=sleeps.sleep,
        restart=RestartPolicy(base_delay_s=1.0, max_delay_s=3.0),
    )
    await _run_until_held(loop, sleeps)

    assert sleeps.asked == [1.0, 2.0, 3.0, 60.0]  # three backoffs, then its interval
    assert (start_ups, passes, loop.reading().restarts) == (4, 1, 3)
    assert loop.reading().state is ComponentState.STOPPED
    assert caplog.text.count("fragile: its loop died") == 3


async def test_a_loop_with_no_pass_for_several_intervals_is_stalled_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = START
    stuck = asyncio.Event()

    async def stuck_pass() -> None:
        await stuck.wait()  # a pass that never returns

    loop = Loop("stuck", stuck_pass, Wakes(60.0), clock=lambda: now)
    components = Components([Component.of("stuck thing", loop)])
    loop.start()
    try:
        await asyncio.sleep(0)
        assert not loop.stalled()
        now = START + timedelta(seconds=STALL_INTERVALS * 60 - 1)
        assert await components.report_stalls() == []
        now = START + timedelta(seconds=STALL_INTERVALS * 60 + 1)
        with caplog.at_level(logging.WARNING):
            assert await components.report_stalls() == ["stuck thing"]
            assert await components.report_stalls() == []  # once per stall
        [reading] = components.readings()
        assert (reading.name, reading.state, reading.stalled) == (
            "stuck thing",
            ComponentState.RUNNING,
            True,
        )
        assert "component stuck thing stalled: no pass since it started" in caplog.text
    finally:
        await loop.stop()
    assert not loop.stalled()  # a stopped loop is not stalled


def test_two_components_cannot_share_a_name() -> None:
    async def stop() -> None: ...

    with pytest.raises(ValueError, match="two components are named 'twin'"):
        Components([Component("twin", lambda: None, stop), Component("twin", lambda: None, stop)])
