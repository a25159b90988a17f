"""`/v1/triggers`: webhooks in, schedules and chains, what they start, and their fire log.
Changes go to the TriggerCommands; lists and reads go straight to the store. Every trigger
a response holds is shown with a schedule's next fire times, computed as it is sent."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from sse_starlette import EventSourceResponse

from app.core.errors import NotFound, ValidationFailed
from app.core.shapes import Page
from app.core.streams import TRIGGERS_STREAM
from app.core.vocabulary import TriggerKind
from app.db.idempotency import request_hash
from app.events.api.stream_docs import TRIGGERS
from app.events.api.streams import LastEventIdHeader, LastEventIdQuery, open_stream, resume_point
from app.http.deps import ServicesDep, SessionDep, get_principal
from app.http.headers import IdempotencyKeyHeader, IfMatchHeader, etag, expected_version
from app.http.pagination import CursorQuery, decode_cursor, page
from app.triggers.engine.kinds import KINDS
from app.triggers.schemas import (
    NEXT_FIRES_SHOWN,
    FireRead,
    TriggerCreate,
    TriggerPatch,
    TriggerRead,
)
from app.triggers.store import triggers as store

router = APIRouter(prefix="/v1/triggers", tags=["triggers"], dependencies=[Depends(get_principal)])


def _shown(trigger: TriggerRead, now: datetime) -> TriggerRead:
    """A trigger with its next fire times after `now`, if its kind has any (a schedule:
    none while it is disabled); one whose kind is no longer registered, as it is stored."""
    kind = KINDS.find(trigger.kind)
    if kind is None:
        return trigger
    config = kind.config_of(trigger)
    times = kind.next_fire_times(config, trigger.enabled, now, NEXT_FIRES_SHOWN)
    return trigger.model_copy(update={"next_fire_times": times})


def _respond(response: Response, trigger: TriggerRead) -> TriggerRead:
    response.headers["ETag"] = etag(trigger.version)
    return _shown(trigger, datetime.now(UTC))


@router.post(
    "", status_code=status.HTTP_201_CREATED, response_model=TriggerRead, summary="Create a trigger"
)
async def create_trigger(
    body: TriggerCreate,
    request: Request,
    response: Response,
    services: ServicesDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> TriggerRead:
    """`config` is read by `kind`, `target` by its own `kind`; their templates are checked
    now (a placeholder that does not parse, or reads what the trigger's kind does not
    provide, is a 422 naming the field, e.g. `body.target.input`). Rules the schema cannot
    state: a schedule has exactly one of `cron` (a 5-field expression that fires) and
    `interval_s`, and `timezone` is an IANA zone; a run chain names `agent_id` and no
    `workflow_id`, a workflow chain the reverse, with `statuses` an execution can end in
    (`completed`, `failed`, `cancelled`). The agent or workflow
    the target starts must exist (404). A webhook trigger's `secret` is in this response
    only (and in `rotate-secret`'s). With `Idempotency-Key`, a repeat gets the trigger as
    it is now (`Idempotent-Replayed: true`)."""
    digest = request_hash(body.model_dump(mode="json")) if idempotency_key else None
    trigger, replayed = await services.triggers.create(
        body, idempotency_key=idempotency_key, request_hash=digest
    )
    response.headers["Location"] = str(request.url_for("get_trigger", trigger_id=trigger.id))
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return _respond(response, trigger)


@router.get("", response_model=Page[TriggerRead], summary="List triggers")
async def list_triggers(
    session: SessionDep,
    kind: TriggerKind | None = None,
    enabled: bool | None = None,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[TriggerRead]:
    """Oldest first."""
    filters: dict[str, object] = {}
    if kind is not None:
        filters["kind"] = kind.value
    if enabled is not None:
        filters["enabled"] = enabled
    rows = await store.list_triggers(
        session, after_id=decode_cursor(cursor), limit=limit + 1, filters=filters
    )
    now = datetime.now(UTC)
    return page([_shown(row, now) for row in rows], limit)


@router.get(
    "/events",
    response_class=EventSourceResponse,
    summary="Stream trigger fires (SSE)",
    responses={200: TRIGGERS.response()},
)
async def stream_trigger_events(
    services: ServicesDep,
    last_event_id: LastEventIdHeader = None,
    last_event_id_query: LastEventIdQuery = None,
) -> EventSourceResponse:
    """Events `trigger.fired`, `trigger.fire_failed` and `trigger.fire_skipped`, one per
    fire of any trigger, with what it started; the `id` is the event's sequence number.
    Without a resume point only new events are sent."""
    after = resume_point(last_event_id, last_event_id_query)
    return await open_stream(services, TRIGGERS_STREAM, after)


@router.get("/{trigger_id}", response_model=TriggerRead, summary="Get a trigger")
async def get_trigger(trigger_id: str, session: SessionDep, response: Response) -> TriggerRead:
    trigger = await store.get_trigger(session, trigger_id)
    if trigger is None:
        raise NotFound("trigger", trigger_id)
    return _respond(response, trigger)


@router.patch("/{trigger_id}", response_model=TriggerRead, summary="Update a trigger")
async def update_trigger(
    trigger_id: str,
    body: TriggerPatch,
    response: Response,
    services: ServicesDep,
    if_match: IfMatchHeader = None,
) -> TriggerRead:
    """The fields sent replace the trigger's (`target` and `config` as a whole, checked as
    at create). A schedule whose `config` changes is armed again from now. A stale
    `If-Match` is a 409 `version_conflict`."""
    if not body.model_fields_set:
        raise ValidationFailed.field("body", "names no field to change")
    trigger = await services.triggers.update(
        trigger_id, body, expected_version=expected_version(if_match)
    )
    return _respond(response, trigger)


@router.delete("/{trigger_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a trigger")
async def delete_trigger(
    trigger_id: str, services: ServicesDep, if_match: IfMatchHeader = None
) -> Response:
    """Its fire log goes with it; the runs and executions it started stay."""
    await services.triggers.delete(trigger_id, expected_version=expected_version(if_match))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{trigger_id}/enable",
    response_model=TriggerRead,
    summary="Enable a trigger (resume a schedule)",
)
async def enable_trigger(
    trigger_id: str, response: Response, services: ServicesDep, if_match: IfMatchHeader = None
) -> TriggerRead:
    """It fires again. For a schedule this is **resume**: it is armed, its `next_fire_at`
    its next time from now; the times it passed while paused are not fired, whatever its
    misfire policy (that policy is for times missed while no process was up)."""
    trigger = await services.triggers.set_enabled(
        trigger_id, True, expected_version=expected_version(if_match)
    )
    return _respond(response, trigger)


@router.post(
    "/{trigger_id}/disable",
    response_model=TriggerRead,
    summary="Disable a trigger (pause a schedule)",
)
async def disable_trigger(
    trigger_id: str, response: Response, services: ServicesDep, if_match: IfMatchHeader = None
) -> TriggerRead:
    """It fires no more until enabled: a webhook delivery is refused (409
    `trigger_disabled`). For a schedule this is **pause**: its `next_fire_at` becomes null
    and `next_fire_times` empty; a fire already under way finishes."""
    trigger = await services.triggers.set_enabled(
        trigger_id, False, expected_version=expected_version(if_match)
    )
    return _respond(response, trigger)


@router.post(
    "/{trigger_id}/rotate-secret",
    response_model=TriggerRead,
    summary="Rotate a webhook trigger's secret",
)
async def rotate_trigger_secret(
    trigger_id: str, response: Response, services: ServicesDep, if_match: IfMatchHeader = None
) -> TriggerRead:
    """A new `secret`, in this response only; deliveries signed with the old one are
    refused from now on. 409 for a trigger that is not a webhook."""
    trigger = await services.triggers.rotate_secret(
        trigger_id, expected_version=expected_version(if_match)
    )
    return _respond(response, trigger)


@router.get("/{trigger_id}/fires", response_model=Page[FireRead], summary="List a trigger's fires")
async def list_trigger_fires(
    trigger_id: str,
    session: SessionDep,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[FireRead]:
    """The fire log, newest first: each fire's occasion (`fire_key`), status, what it
    started, or why it failed or was skipped."""
    if await store.get_trigger(session, trigger_id) is None:
        raise NotFound("trigger", trigger_id)
    rows = await store.list_fires(
        session, trigger_id, before_id=decode_cursor(cursor), limit=limit + 1
    )
    return page(rows, limit)
