"""After commit, one way: each written stream's readers are woken once, the events logged
with their context, a run's events counted in the metrics, and the runs board woken when
a run's lifecycle event is among them."""

from __future__ import annotations

import logging
from contextlib import ExitStack

import pytest

from app.core.states import RunStatus
from app.core.streams import RUNS_STREAM, TASK_STREAM, run_stream
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published, run_written
from app.telemetry.metrics import Metrics
from tests.telemetry.test_metrics import a_run, sample


async def woken(
    bus: EventBus, streams: list[str], written: list[Written], metrics: Metrics | None = None
) -> list[str]:
    """The streams among `streams` whose readers `published` woke."""
    with ExitStack() as stack:
        subscriptions = [stack.enter_context(bus.subscribe(s)) for s in streams]
        published(bus, written, metrics=metrics)
        return [s.stream for s in subscriptions if await s.wait(timeout_s=0.01)]


async def test_a_runs_lifecycle_event_wakes_its_stream_and_the_board_and_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus, metrics = EventBus(), Metrics()
    run = a_run(RunStatus.COMPLETED)
    streams = [run_stream(run.id), RUNS_STREAM, TASK_STREAM]

    with caplog.at_level(logging.INFO, logger="loopwright.events"):
        done = await woken(
            bus, streams, [run_written(run, [("agent_run.completed", {})])], metrics=metrics
        )

    assert done == [run_stream(run.id), RUNS_STREAM]
    assert sample(metrics, "loopwright_run_outcomes_total", status="completed") == 1
    (record,) = caplog.records
    assert record.getMessage() == "agent_run.completed"
    fields = getattr(record, "fields", None)
    assert fields == {"event": "agent_run.completed", "run_id": run.id, "lane": run.lane}


async def test_other_events_wake_only_their_streams() -> None:
    bus = EventBus()
    run = a_run()
    streams = [run_stream(run.id), RUNS_STREAM, TASK_STREAM, "quiet"]
    written = [
        run_written(run, [("agent.tool.retry", {"tool": "search"})]),
        Written(TASK_STREAM, [("task.created", {"seq": 1})], {"task_id": "task_1"}),
        Written(TASK_STREAM, [("task.updated", {"seq": 2})], {"task_id": "task_1"}),
    ]

    assert await woken(bus, streams, written) == [run_stream(run.id), TASK_STREAM]
    assert await woken(bus, streams, []) == []
