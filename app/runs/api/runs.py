"""`/v1/runs`, `/v1/conversations/{id}/messages` and `.../journal`, `/v1/lanes`."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status
from sse_starlette import EventSourceResponse

from app.core.bounds import POSITION_MAX
from app.core.errors import NotFound, ValidationFailed
from app.core.shapes import Order, Page
from app.core.states import RUN_SETTLED, RunStatus
from app.core.streams import RUNS_STREAM, lane_stream, run_stream
from app.core.vocabulary import HumanAction
from app.db.idempotency import request_hash
from app.events import store as event_store
from app.events.api.stream_docs import LANE, RUN, RUNS_BOARD
from app.events.api.streams import (
    LastEventIdHeader,
    LastEventIdQuery,
    RunEnding,
    RunLastEventIdHeader,
    RunLastEventIdQuery,
    StepPoint,
    open_stream,
    resume_point,
    step_point,
)
from app.http.deps import ServicesDep, SessionDep, get_principal
from app.http.headers import IdempotencyKeyHeader, decimal, etag
from app.http.pagination import CursorQuery, decode_cursor, encode_cursor, page, present
from app.runs.schemas.history import RunFork, RunStepRead
from app.runs.schemas.journal import JournalRead
from app.runs.schemas.runs import (
    HumanResponse,
    LaneRead,
    LaneSummary,
    MessageRead,
    RunCreate,
    RunRead,
)
from app.runs.store import conversations, history
from app.runs.store import journal as journal_store
from app.runs.store import runs as run_store
from app.triggers.schemas import FireRead
from app.triggers.store import triggers as trigger_store

router = APIRouter(tags=["runs"], dependencies=[Depends(get_principal)])
# A source's chained fires: one per chain trigger its end matched (or ends: a failed run
# retried may end twice), so a short list.
CHAINED_LIMIT = 200


async def _run_or_404(session: SessionDep, run_id: str) -> RunRead:
    run = await run_store.get_run(session, run_id)
    if run is None:
        raise NotFound("run", run_id)
    (live,) = await history.with_live_counters(session, [run])
    return live


@router.post(
    "/v1/runs",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=RunRead,
    summary="Start a run",
)
async def create_run(
    body: RunCreate,
    request: Request,
    response: Response,
    services: ServicesDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> RunRead:
    """The run is queued on its lane (202); follow it with `GET /v1/runs/{id}/events` or
    `GET /v1/runs/{id}/wait`."""
    digest = request_hash(body.model_dump(mode="json")) if idempotency_key else None
    run, replayed = await services.runs.create(
        body, idempotency_key=idempotency_key, request_hash=digest
    )
    response.headers["Location"] = str(request.url_for("get_run", run_id=run.id))
    response.headers["ETag"] = etag(run.version)
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return run


@router.get("/v1/runs", response_model=Page[RunRead], summary="List runs")
async def list_runs(
    session: SessionDep,
    status: RunStatus | None = None,
    lane: Annotated[str | None, Query(max_length=300)] = None,
    agent_id: Annotated[str | None, Query(max_length=200)] = None,
    conversation_id: Annotated[str | None, Query(max_length=200)] = None,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    order: Annotated[
        Order, Query(description="`newest` first, or `oldest` first (the default).")
    ] = Order.OLDEST,
) -> Page[RunRead]:
    filters = present(
        status=status,
        lane=lane,
        agent_id=agent_id,
        conversation_id=conversation_id,
    )
    rows = await run_store.list_runs(
        session,
        start=decode_cursor(cursor),
        limit=limit + 1,
        filters=filters,
        newest_first=order is Order.NEWEST,
    )
    return page(await history.with_live_counters(session, rows), limit)


@router.get(
    "/v1/runs/events",
    response_class=EventSourceResponse,
    summary="Stream run status changes of every run (SSE)",
    responses={200: RUNS_BOARD.response()},
)
async def stream_all_run_events(
    services: ServicesDep,
    last_event_id: LastEventIdHeader = None,
    last_event_id_query: LastEventIdQuery = None,
) -> EventSourceResponse:
    return await open_stream(
        services, RUNS_STREAM, resume_point(last_event_id, last_event_id_query)
    )


@router.get("/v1/runs/{run_id}", response_model=RunRead, summary="Get a run")
async def get_run(run_id: str, session: SessionDep, response: Response) -> RunRead:
    run = await _run_or_404(session, run_id)
    response.headers["ETag"] = etag(run.version)
    return run


@router.post("/v1/runs/{run_id}/cancel", response_model=RunRead, summary="Cancel a run")
async def cancel_run(run_id: str, services: ServicesDep) -> RunRead:
    """A queued run is cancelled at once; a running one at its next boundary (its
    completed tool results are kept); one waiting on a human at once."""
    return await services.runs.cancel(run_id)


@router.post("/v1/runs/{run_id}/resume", response_model=RunRead, summary="Resume a timed-out run")
async def resume_run(run_id: str, services: ServicesDep) -> RunRead:
    """A `timed_out` run with `resume_available` continues from its latest checkpoint:
    completed tool calls are replayed from the ledger, never re-run."""
    return await services.runs.resume(run_id)


@router.post("/v1/runs/{run_id}/retry", response_model=RunRead, summary="Retry a failed run")
async def retry_run(run_id: str, services: ServicesDep) -> RunRead:
    """A `dead_letter`, `failed` or `timed_out` run goes back to the queue with a fresh
    retry budget; its error log is kept."""
    return await services.runs.retry(run_id)


@router.post(
    "/v1/runs/{run_id}/human-response", response_model=RunRead, summary="Answer a waiting run"
)
async def respond_to_run(run_id: str, body: HumanResponse, services: ServicesDep) -> RunRead:
    """`answer` (the default) gives the waiting call its result, `response`; `retry_call`
    runs a side-effecting call cut short by a crash again (`waiting_for.reason` is
    `resume_unsafe`). A run that is not waiting on a person is a 409."""
    return await services.runs.respond(
        run_id, body.response, retry_call=body.action is HumanAction.RETRY_CALL
    )


@router.get(
    "/v1/runs/{run_id}/history",
    response_model=Page[RunStepRead],
    summary="A run's history, step by step",
)
async def list_run_history(
    run_id: str,
    session: SessionDep,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[RunStepRead]:
    """Every boundary of the run in order, one step each: its kind, when, the messages it
    appended, the tool calls it started or answered, the counters it moved, the events
    it emitted. A step's `seq` is what `POST /v1/runs/{id}/fork` takes."""
    await _run_or_404(session, run_id)
    start = decode_cursor(cursor)
    after = decimal(start, POSITION_MAX) if start is not None else 0
    if after is None:
        raise ValidationFailed.field(
            "query.cursor",
            "is not a cursor of this list (pass the `next_cursor` of the page before)",
        )
    steps = await history.steps(session, run_id, after=after, limit=limit + 1)
    return page([history.step_read(step) for step in steps], limit)


@router.get(
    "/v1/runs/{run_id}/chained",
    response_model=list[FireRead],
    summary="What a run's end started through chain triggers",
)
async def list_run_chained(run_id: str, session: SessionDep) -> list[FireRead]:
    """The fires of chain triggers this run's end matched, oldest first: each names the
    run or execution it started (or why it failed or was skipped). The other side of the
    link: a run a chain started has the chain and this run in `metadata.trigger`
    (`id`, `source`, `depth`)."""
    await _run_or_404(session, run_id)
    return await trigger_store.fires_of_source(session, run_id, limit=CHAINED_LIMIT)


@router.post(
    "/v1/runs/{run_id}/fork",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=RunRead,
    summary="Start a new run from one of a run's steps",
)
async def fork_run(
    run_id: str, body: RunFork, request: Request, response: Response, services: ServicesDep
) -> RunRead:
    """Time travel for debugging: a new run, on a new conversation, that starts from the
    state the run was in after step `from_seq` (its transcript up to there, the loop's
    watchers and iteration), with `input` as a new user message if given. The original
    is untouched. Tool calls the step left unanswered are not replayed from the ledger:
    they run again in the fork as new calls (with new idempotency keys, and new approvals
    where needed). A `from_seq` the run does not have is a 422."""
    fork = await services.runs.fork(run_id, body)
    response.headers["Location"] = str(request.url_for("get_run", run_id=fork.id))
    response.headers["ETag"] = etag(fork.version)
    return fork


@router.get("/v1/runs/{run_id}/wait", response_model=RunRead, summary="Wait for a run to settle")
async def wait_for_run(
    run_id: str,
    services: ServicesDep,
    timeout_s: Annotated[float, Query(gt=0, le=300)] = 30.0,
) -> RunRead:
    """Returns when the run has settled or waits on a human, or when `timeout_s` passes
    (then with the run as it is)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    with services.bus.subscribe(run_stream(run_id)) as wake:
        while True:
            async with services.sessionmaker() as session:
                run = await _run_or_404(session, run_id)
            if run.status in RUN_SETTLED or run.status is RunStatus.WAITING_ON_HUMAN:
                return run
            remaining = deadline - loop.time()
            if remaining <= 0:
                return run
            await wake.wait(min(remaining, services.settings.streams.poll_interval_s))


@router.get(
    "/v1/runs/{run_id}/events",
    response_class=EventSourceResponse,
    summary="Stream a run's events (SSE)",
    responses={200: RUN.response()},
)
async def stream_run_events(
    run_id: str,
    services: ServicesDep,
    session: SessionDep,
    last_event_id: RunLastEventIdHeader = None,
    last_event_id_query: RunLastEventIdQuery = None,
    keep_open: Annotated[
        bool,
        Query(
            description="Stay open after the run settles (to see a retry or resume); by "
            "default the stream ends shortly after the event that settled the run."
        ),
    ] = False,
) -> EventSourceResponse:
    """Every event of the run from the start (or after `Last-Event-ID`), then live;
    `message.delta` previews of streamed text carry no id. The stream ends about a second
    after the run settles (completed, failed for good, cancelled, timed out or
    dead-lettered), unless `keep_open`."""
    run = await _run_or_404(session, run_id)
    await session.close()  # the stream holds no session
    point = step_point(last_event_id, last_event_id_query) or StepPoint(0)
    # Already settled (a client reconnecting after the end): it ends unless events follow.
    ending = None if keep_open else RunEnding(settled=run.status in RUN_SETTLED)
    stream = run_stream(run_id)
    return await open_stream(services, stream, point.after, ending, seen=point.seen)


@router.get(
    "/v1/conversations/{conversation_id}/messages",
    response_model=list[MessageRead],
    summary="A conversation's messages",
)
async def list_conversation_messages(
    conversation_id: str,
    session: SessionDep,
    after: Annotated[
        int,
        # positions are INTEGER: a larger one is refused here, not by Postgres (a 500)
        Query(ge=-1, le=POSITION_MAX, description="Only messages after this position."),
    ] = -1,
    limit: Annotated[int, Query(ge=1, le=1_000)] = 200,
) -> list[MessageRead]:
    if not await conversations.exists(session, conversation_id):
        raise NotFound("conversation", conversation_id)
    return await history.read_messages(session, conversation_id, after=after, limit=limit)


@router.get(
    "/v1/conversations/{conversation_id}/journal",
    response_model=JournalRead,
    summary="A conversation's run journal",
)
async def get_conversation_journal(conversation_id: str, session: SessionDep) -> JournalRead:
    """What the agent wrote down with its journal tools; after a failed run, the handoff:
    its last objective, the state it reached and the next action it suggested."""
    stored = await journal_store.read_journal(session, conversation_id)
    if stored is None:
        raise NotFound("conversation", conversation_id)
    return JournalRead.model_validate({**stored, "conversation_id": conversation_id})


@router.get("/v1/lanes", response_model=Page[LaneSummary], summary="List busy lanes")
async def list_lanes(
    session: SessionDep,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[LaneSummary]:
    """The lanes a run holds or waits on (an idle lane is not listed), in the order of
    their oldest unfinished run: the lane busy the longest first. `GET /v1/lanes/{lane}`
    has a lane's whole queue."""
    rows = await run_store.busy_lanes(
        session, after=decode_cursor(cursor), limit=limit + 1, shown=0
    )
    lanes = [
        LaneSummary(
            lane=row.lane,
            active=row.active,
            queued=row.queued,
            delayed=row.delayed,
            oldest_run_id=row.oldest_run_id,
        )
        for row in rows[:limit]
    ]
    # The cursor is the last lane's oldest run: lane names can be longer than a cursor.
    more = len(rows) > limit
    return Page(items=lanes, next_cursor=encode_cursor(lanes[-1].oldest_run_id) if more else None)


# `:path`: a lane's name may contain `/` (`team/alpha`); none ends in `/events` (refused at
# create), so the stream's route, declared first, never takes a lane's JSON for its own.
LaneName = Annotated[
    str, Path(min_length=1, max_length=300, description="The lane (`:` and `/` as they are).")
]


@router.get(
    "/v1/lanes/{lane:path}/events",
    response_class=EventSourceResponse,
    summary="Stream the lifecycle events of a lane's runs (SSE)",
    responses={200: LANE.response()},
)
async def stream_lane_events(
    lane: LaneName,
    services: ServicesDep,
    last_event_id: LastEventIdHeader = None,
    last_event_id_query: LastEventIdQuery = None,
) -> EventSourceResponse:
    """The `agent_run.*` events of every run on the lane (`queued`, `started`,
    `waiting_on_human`, `completed`, …), each as on the run's own stream, with its `run_id`
    and `status`. A lane has no end, so without a resume point only new events are sent:
    resume from the `last_event_id` of `GET /v1/lanes/{lane}` to follow on from that
    snapshot, or from 0 to replay the lane's whole history."""
    return await open_stream(
        services, lane_stream(lane), resume_point(last_event_id, last_event_id_query)
    )


@router.get("/v1/lanes/{lane:path}", response_model=LaneRead, summary="Who holds a lane")
async def get_lane(lane: LaneName, session: SessionDep) -> LaneRead:
    # Where the lane's stream stands, read before the runs: an event committed in between
    # is then both in the snapshot and replayed after `last_event_id`, never in neither.
    last = await event_store.last_seq(session, lane_stream(lane))
    active, queued = await run_store.lane(session, lane)
    return LaneRead(lane=lane, active=active, queued=queued, last_event_id=last)
