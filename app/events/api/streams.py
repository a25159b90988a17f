"""Server-Sent Events over the events table (a run's stream: over its history): replay
after `Last-Event-ID`, then live.

The generator subscribes to the bus before its first read, so a change committed between
the replay and the wait still wakes it; every read starts after the last id sent, so
nothing is sent twice. It holds no session between reads.

Limits of one process's streams:
- at most `max_subscribers` streams are open at once; past it a stream request is refused
  with 503 `too_many_streams` and `Retry-After`;
- the readers of one stream share one read of the table per wake-up and a tail of at most
  `replay_batch` events (`events/engine/stream_tails.py`); a reader further behind reads for
  itself, at most `replay_batch` events at a time, and takes the next batch only when the
  previous one has been handed to the server, which takes a write only when the
  connection drains: a slow reader slows its own reads and nothing piles up;
- a client that takes longer than `send_timeout_s` to accept one write (it stopped
  reading) is dropped: its stream ends and its connection is reset.

A run's own stream ends once it has sent the event that settled the run (completed,
failed for good, cancelled, timed out, dead-lettered), after `settled_linger_s` for what
is committed right after; a client that wants to see a retry asks to keep it open.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

import anyio
from fastapi import Header, Query
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession
from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.types import Receive, Scope, Send

from app.core.bounds import EVENT_ID_MAX, POSITION_MAX, decimal_pattern
from app.core.errors import TooManyStreams, ValidationFailed
from app.core.states import RUN_SETTLED
from app.core.streams import run_of
from app.events import store as event_store
from app.events.engine.stream_slots import StreamSlots
from app.events.engine.stream_tails import Encoded
from app.events.store import StoredEvent
from app.http.connections import abort_connection
from app.http.headers import decimal
from app.http.problems import problem_response
from app.runs.store import history
from app.runs.store.history import StoredStep, step_events
from app.services import Services
from app.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

# The two ways a client says where to resume (see `resume_point`), for every SSE endpoint.
# Event ids are BIGINT: a larger one could never be reached, and Postgres refuses it as a
# parameter, so the stream would open and then fail every read.
LastEventIdHeader = Annotated[
    str | None,
    Header(
        alias="Last-Event-ID",
        description=f"Resume after this event id (0 to {EVENT_ID_MAX}); empty: not given.",
        json_schema_extra={"pattern": f"^(?:{decimal_pattern(0, EVENT_ID_MAX)})?$"},
    ),
]
LastEventIdQuery = Annotated[
    int | None,
    Query(alias="last_event_id", ge=0, le=EVENT_ID_MAX, description="Resume after this event id."),
]


# A run's stream is its history, and its ids are the steps' numbers (INTEGER): the last
# event of step 12 is `12`, the ones before it `12.0`, `12.1`, …, so a client cut off
# inside a step resumes inside it.
_STEP = decimal_pattern(0, POSITION_MAX)
RunLastEventIdHeader = Annotated[
    str | None,
    Header(
        alias="Last-Event-ID",
        description="Resume after this event id: a step's number (0 to "
        f"{POSITION_MAX}), or `<step>.<n>` for an event inside a step; empty: not given.",
        json_schema_extra={"pattern": f"^(?:(?:{_STEP})(?:[.](?:{_STEP}))?)?$"},
    ),
]
RunLastEventIdQuery = Annotated[
    int | None,
    Query(alias="last_event_id", ge=0, le=POSITION_MAX, description="Resume after this step."),
]


@dataclass(frozen=True)
class StepPoint:
    """Where a client stands in a run's stream: after step `after`, and `seen` events of
    the step after it."""

    after: int
    seen: int = 0


def step_point(header: str | None, query: int | None) -> StepPoint | None:
    """`resume_point` for a run's stream, whose ids may name an event inside a step."""
    if header is not None and header.strip():
        step, dot, part = header.strip().partition(".")
        number = decimal(step, POSITION_MAX)
        index = decimal(part, POSITION_MAX) if dot else None
        if number is None or (dot and index is None):
            raise ValidationFailed.field(
                "header.Last-Event-ID",
                f"must be an event id of this stream (a step from 0 to {POSITION_MAX}, "
                "or `<step>.<n>`)",
            )
        # `12.1`: events 0 and 1 of step 12 were seen, so step 11 is the last one whole.
        return StepPoint(number - 1, index + 1) if index is not None else StepPoint(number)
    return None if query is None else StepPoint(query)


def resume_point(header: str | None, query: int | None) -> int | None:
    """The sequence number a client last saw: the `Last-Event-ID` header wins over the
    `last_event_id` query parameter (browsers' EventSource sends the header on reconnect)."""
    if header is not None and header.strip():
        value = decimal(header.strip(), EVENT_ID_MAX)
        if value is None:
            raise ValidationFailed.field(
                "header.Last-Event-ID", f"must be an event id (an integer from 0 to {EVENT_ID_MAX})"
            )
        return value
    return query


@dataclass(frozen=True)
class RunEnding:
    """A run's own stream ends once the run has settled; `settled`: it had when the
    stream opened."""

    settled: bool


async def open_stream(
    services: Services,
    stream: str,
    after: int | None,
    ending: RunEnding | None = None,
    *,
    seen: int = 0,
) -> EventSourceResponse:
    """Without a resume point the stream starts at its current end (live events only).
    `ending`: a run's stream, which ends once the run has settled; `seen`: events of the
    step after `after` the client has (a run's stream)."""
    slots = services.stream_slots
    if slots.open >= slots.limit:  # early, before any work; the response takes the slot
        services.metrics.streams_refused.inc()
        raise TooManyStreams(slots.limit, slots.retry_after_s)
    if after is None:
        async with services.sessionmaker() as session:
            after = await stream_end(session, stream)
    settings = services.settings.streams
    return _SlottedStream(
        slots,
        services.metrics,
        _events(services, stream, after, ending, seen),
        ping=settings.keepalive_s,
        send_timeout=settings.send_timeout_s,
        shutdown_event=services.shutting_down,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


class _SlottedStream(EventSourceResponse):
    """Holds a stream slot for exactly as long as the response runs: taken when the server
    calls it (refused there too when the process is full), given back however it ends."""

    def __init__(
        self,
        slots: StreamSlots,
        metrics: Metrics,
        content: AsyncIterator[bytes],
        *,
        ping: float,
        send_timeout: float,
        shutdown_event: anyio.Event,
        headers: dict[str, str],
    ) -> None:
        super().__init__(
            content,
            ping=ping,
            send_timeout=send_timeout,
            shutdown_event=shutdown_event,
            headers=headers,
        )
        self._slots = slots
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            with self._slots.hold():
                await self._serve(scope, receive, send)
        except TooManyStreams as refused:
            self._metrics.streams_refused.inc()
            await problem_response(refused, scope.get("path"))(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            self._metrics.streams_dropped.inc()
            log.info(
                "stream %s: the client accepted nothing for %ss; dropping it",
                scope.get("path"),
                self.send_timeout,
            )
            if abort_connection(scope):
                # The server learns of the reset on its next loop turn; wait for it, so
                # it sees a lost connection rather than an unfinished response.
                await asyncio.sleep(0)


def encode_event(event: StoredEvent) -> Encoded:
    """A persisted event as sent to a client (its id is the sequence number)."""
    data = {**event.data, "at": event.created_at.isoformat()}
    sse = ServerSentEvent(data=json.dumps(data), event=event.type, id=str(event.seq)).encode()
    # A run's events carry the status the run was left in (runs/engine/run_transitions.py).
    status = event.data.get("status") if event.type.startswith("agent_run.") else None
    return Encoded(event.seq, sse, None if status is None else status in _SETTLED)


def encode_step(step: StoredStep, start: int = 0) -> Encoded:
    """A step of a run's history as sent to a client (from its event `start` on): its
    events in order, the last with the step's number as its id, the others with the
    step's number and their index (see `RunLastEventIdHeader`)."""
    base = {"run_id": step.run_id, "status": step.status.value, "at": step.at.isoformat()}
    events = step_events(step)
    settles: bool | None = None
    chunks = []
    for n, (kind, data) in enumerate(events):
        if kind.startswith("agent_run."):
            settles = step.status in RUN_SETTLED
        if n < start:
            continue
        event_id = str(step.seq) if n == len(events) - 1 else f"{step.seq}.{n}"
        # The envelope's fields are the run's: an event's own field of the same name (none
        # should have one) must not pass for the run's status.
        sse = ServerSentEvent(data=json.dumps(base | data | base), event=kind, id=event_id)
        chunks.append(sse.encode())
    if not events:  # a step with no events still moves the reader's position
        chunks.append(ServerSentEvent(comment="step", id=str(step.seq)).encode())
    return Encoded(step.seq, b"".join(chunks), settles)


_SETTLED = frozenset(status.value for status in RUN_SETTLED)


async def read_stream(session: AsyncSession, stream: str, after: int, limit: int) -> list[Encoded]:
    """A stream's events after `after`, as sent: a run's steps from its history, any other
    stream's events from the events table."""
    run_id = run_of(stream)
    if run_id is not None:
        steps = await history.steps(session, run_id, after=min(after, POSITION_MAX), limit=limit)
        return [encode_step(step) for step in steps]
    events = await event_store.read_events(session, stream, after=after, limit=limit)
    return [encode_event(event) for event in events]


async def stream_end(session: AsyncSession, stream: str) -> int:
    run_id = run_of(stream)
    if run_id is not None:
        return await history.last_seq(session, run_id)
    return await event_store.last_seq(session, stream)


def ends_at(batch: list[Encoded], ending: float | None, if_settled_now: float) -> float | None:
    """When a run's stream ends after `batch`: the run's latest status decides, so a
    time-out followed by its automatic resume (one transaction) leaves the run queued and
    the stream open; a settled run's stream ends once, at the time set when it settled."""
    statuses = [event.settles_run for event in batch if event.settles_run is not None]
    if not statuses:
        return ending
    if not statuses[-1]:
        return None
    return if_settled_now if ending is None else ending


async def _events(
    services: Services, stream: str, after: int, ending: RunEnding | None, seen: int = 0
) -> AsyncIterator[bytes]:
    """Each batch goes out as one write: one send (and one send timeout) per batch rather
    than per event."""
    settings = services.settings.streams
    linger_s = settings.settled_linger_s
    linger_until: float | None = None  # the run settled: the stream ends at this time
    if ending is not None and ending.settled:
        linger_until = asyncio.get_running_loop().time() + linger_s
    run_id = run_of(stream)
    if seen and run_id is not None:  # the rest of the step the client was cut off in
        async with services.sessionmaker() as session:
            rest = await history.steps(session, run_id, after=after, limit=1)
        if rest:
            yield encode_step(rest[0], start=seen).sse
            after = rest[0].seq
    with services.bus.subscribe(stream) as wake, services.stream_tails.reading(stream) as tail:
        # What the tail already holds goes out at once (a reconnect's first events); the
        # first wait comes only after a refresh that started after subscribing, so a
        # change committed before the subscription is never left waiting for the poll.
        refreshed = False
        while True:
            batch = tail.after(after, settings.replay_batch)
            if batch is None:  # older than the shared tail: this reader reads for itself
                batch = await _read(services, stream, after, settings.replay_batch)
            if batch:
                yield b"".join(encoded.sse for encoded in batch)
                after = batch[-1].seq
                if ending is not None:
                    now = asyncio.get_running_loop().time()
                    linger_until = ends_at(batch, linger_until, now + linger_s)
            # Previews without an id: a reconnecting client resumes from persisted events.
            for event_type, data in wake.take_ephemeral():
                yield ServerSentEvent(data=json.dumps(data), event=event_type).encode()
            if len(batch) < settings.replay_batch:
                wait_s = settings.poll_interval_s
                if linger_until is not None:
                    wait_s = linger_until - asyncio.get_running_loop().time()
                    if wait_s <= 0:
                        return
                if refreshed:
                    await wake.wait(wait_s)
                await tail.refresh()
                refreshed = True


async def _read(services: Services, stream: str, after: int, limit: int) -> list[Encoded]:
    try:
        async with services.sessionmaker() as session:
            return await read_stream(session, stream, after, limit)
    except (SQLAlchemyError, OSError) as exc:
        log.warning("stream %s cannot read events (%s); retrying", stream, exc)
        return []
