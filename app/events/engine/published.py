"""After commit: what a transaction wrote is made known in this process.

Readers of each stream it appended to are woken, its events are logged and the runs'
events counted in the metrics. Only after the commit: a rolled-back event did not happen,
and a reader woken early would find nothing new. Every command and component that appends
events calls `published` once its transaction has committed.

The bus carries no data (see `app.events.engine.bus`): a wake-up that is lost or spurious delays
or repeats a read, never loses an event. Other processes hear of the commit through the
database's NOTIFY, not through this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.streams import RUNS_STREAM, StreamEvent, run_stream
from app.events.engine.bus import EventBus
from app.runs.schemas.runs import RunRead
from app.telemetry.logs import log_events
from app.telemetry.metrics import Metrics


@dataclass(frozen=True)
class Written:
    """Events a transaction appended to `stream` (none: only wake its readers), logged with
    `context`; with a `run`, they are that run's and count in its metrics."""

    stream: str
    events: Sequence[StreamEvent] = ()
    context: Mapping[str, Any] = field(default_factory=dict)
    run: RunRead | None = None


def run_written(
    run: RunRead, events: Sequence[StreamEvent], *, worker: str | None = None
) -> Written:
    """A run's events, on its stream, logged with the run, its lane and the worker that
    wrote them (a worker's identity, host and pid, goes to the logs, never to clients);
    `run` as the transaction left it."""
    context = {"run_id": run.id, "lane": run.lane} | ({"worker": worker} if worker else {})
    return Written(run_stream(run.id), events, context, run)


def published(bus: EventBus, written: Iterable[Written], *, metrics: Metrics | None = None) -> None:
    """Log and count the events, then wake each stream's readers once. A run's lifecycle
    events (`agent_run.*`) are also copied to the runs board (`emit_many`), so the board's
    readers (workers waiting for a lane to come free, dashboards) are woken with them."""
    streams: list[str] = []
    board = False
    for part in written:
        log_events(part.events, **part.context)
        if part.run is not None:
            if metrics is not None:
                metrics.observe_run_events(part.events, part.run)
            board = board or any(kind.startswith("agent_run.") for kind, _ in part.events)
        if part.stream not in streams:
            streams.append(part.stream)
    if board and RUNS_STREAM not in streams:
        streams.append(RUNS_STREAM)
    for stream in streams:
        bus.publish(stream)
