"""`/v1/webhooks`: outbound webhooks. Subscriptions and redelivers go to the
WebhookCommands; lists, the delivery log and reads go straight to the store."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from sse_starlette import EventSourceResponse

from app.core.errors import NotFound, ValidationFailed
from app.core.shapes import Page
from app.core.states import DeliveryStatus
from app.core.streams import WEBHOOKS_STREAM
from app.db.idempotency import request_hash
from app.events.api.stream_docs import WEBHOOKS
from app.events.api.streams import LastEventIdHeader, LastEventIdQuery, open_stream, resume_point
from app.http.deps import ServicesDep, SessionDep, get_principal
from app.http.headers import IdempotencyKeyHeader, IfMatchHeader, etag, expected_version
from app.http.pagination import CursorQuery, decode_cursor, page
from app.webhooks import store
from app.webhooks.engine.commands import public
from app.webhooks.schemas import (
    WebhookCreate,
    WebhookDeliveryDetail,
    WebhookDeliveryRead,
    WebhookPatch,
    WebhookRead,
    WebhookWithSecret,
)

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], dependencies=[Depends(get_principal)])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=WebhookWithSecret,
    summary="Subscribe a URL to events",
)
async def create_webhook(
    body: WebhookCreate,
    request: Request,
    response: Response,
    services: ServicesDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> WebhookWithSecret:
    """Each event of the types listed is POSTed to `url` as JSON (a `WebhookPayload`),
    signed with the `secret` returned here and never shown again (`Loopwright-Signature`,
    see the README); a receiver that does not answer 2xx gets it again with backoff (15 s,
    doubling), then it is dead-lettered. Two rules the schema cannot state, each a 422
    naming `body.url`: a host name must be valid IDNA, and a host that resolves to a
    private, loopback or link-local address is refused unless the operator allows it.

    With `Idempotency-Key`, a repeat of the request gets the first response again
    (`Idempotent-Replayed: true`) and makes no second webhook."""
    digest = request_hash(body.model_dump(mode="json")) if idempotency_key else None
    webhook, replayed = await services.webhooks.create_keyed(
        body, idempotency_key=idempotency_key, request_hash=digest
    )
    response.headers["Location"] = str(request.url_for("get_webhook", webhook_id=webhook.id))
    response.headers["ETag"] = etag(webhook.version)
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return webhook


@router.get("", response_model=Page[WebhookRead], summary="List webhooks")
async def list_webhooks(
    session: SessionDep,
    enabled: bool | None = None,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[WebhookRead]:
    """Oldest first."""
    filters = {} if enabled is None else {"enabled": enabled}
    rows = await store.list_webhooks(
        session, after_id=decode_cursor(cursor), limit=limit + 1, filters=filters
    )
    return page([public(w) for w in rows], limit)


@router.get(
    "/events",
    response_class=EventSourceResponse,
    summary="Stream webhook delivery attempts (SSE)",
    responses={200: WEBHOOKS.response()},
)
async def stream_webhook_events(
    services: ServicesDep,
    last_event_id: LastEventIdHeader = None,
    last_event_id_query: LastEventIdQuery = None,
) -> EventSourceResponse:
    """Events `webhook.delivery.succeeded`, `webhook.delivery.failed` (a retry follows at
    `next_attempt_at`), `webhook.delivery.dead_lettered` and `webhook.delivery.redelivered`,
    for every webhook; the `id` is the event's sequence number. Without a resume point
    only new events are sent."""
    after = resume_point(last_event_id, last_event_id_query)
    return await open_stream(services, WEBHOOKS_STREAM, after)


async def _webhook(session: SessionDep, webhook_id: str) -> WebhookRead:
    found = await store.get_webhook(session, webhook_id)
    if found is None:
        raise NotFound("webhook", webhook_id)
    return public(found)


@router.get("/{webhook_id}", response_model=WebhookRead, summary="Get a webhook")
async def get_webhook(webhook_id: str, session: SessionDep, response: Response) -> WebhookRead:
    webhook = await _webhook(session, webhook_id)
    response.headers["ETag"] = etag(webhook.version)
    return webhook


@router.patch("/{webhook_id}", response_model=WebhookRead, summary="Update a webhook")
async def update_webhook(
    webhook_id: str,
    body: WebhookPatch,
    response: Response,
    services: ServicesDep,
    if_match: IfMatchHeader = None,
) -> WebhookRead:
    """The fields sent replace the webhook's. A new `url` is checked as on create. A stale
    `If-Match` is a 409 `version_conflict`."""
    if not body.model_fields_set:
        raise ValidationFailed.field("body", "names no field to change")
    webhook = await services.webhooks.update(
        webhook_id, body, expected_version=expected_version(if_match)
    )
    response.headers["ETag"] = etag(webhook.version)
    return webhook


@router.delete("/{webhook_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a webhook")
async def delete_webhook(
    webhook_id: str, services: ServicesDep, if_match: IfMatchHeader = None
) -> Response:
    """The webhook goes, with its delivery log; nothing more is sent to it."""
    await services.webhooks.delete(webhook_id, expected_version=expected_version(if_match))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{webhook_id}/rotate-secret",
    response_model=WebhookWithSecret,
    summary="Give a webhook a new secret",
)
async def rotate_webhook_secret(
    webhook_id: str, response: Response, services: ServicesDep, if_match: IfMatchHeader = None
) -> WebhookWithSecret:
    """The new secret signs every attempt from now on (retries of earlier deliveries too);
    the old one signs nothing more. It is shown here only."""
    webhook = await services.webhooks.rotate_secret(
        webhook_id, expected_version=expected_version(if_match)
    )
    response.headers["ETag"] = etag(webhook.version)
    return webhook


@router.get(
    "/{webhook_id}/deliveries",
    response_model=Page[WebhookDeliveryRead],
    summary="List a webhook's deliveries",
)
async def list_webhook_deliveries(
    webhook_id: str,
    session: SessionDep,
    status: DeliveryStatus | None = None,
    cursor: CursorQuery = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Page[WebhookDeliveryRead]:
    """The delivery log, newest first: each delivery's status, attempts and latest attempt
    (status code, latency, the start of the answer, or the error). `status=dead_letter`
    lists what needs a redeliver."""
    await _webhook(session, webhook_id)
    rows = await store.list_deliveries(
        session, webhook_id, before_id=decode_cursor(cursor), limit=limit + 1, status=status
    )
    return page(rows, limit)


@router.get(
    "/{webhook_id}/deliveries/{delivery_id}",
    response_model=WebhookDeliveryDetail,
    summary="Get a delivery with its attempts",
)
async def get_webhook_delivery(
    webhook_id: str, delivery_id: str, session: SessionDep
) -> WebhookDeliveryDetail:
    delivery = await store.get_delivery(session, webhook_id, delivery_id)
    if delivery is None:
        raise NotFound("webhook delivery", delivery_id)
    attempts = await store.attempts_of(session, delivery_id)
    return WebhookDeliveryDetail(**delivery.model_dump(), attempt_log=attempts)


@router.post(
    "/{webhook_id}/deliveries/{delivery_id}/redeliver",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=WebhookDeliveryRead,
    summary="Send a delivery again",
)
async def redeliver_webhook_delivery(
    webhook_id: str, delivery_id: str, services: ServicesDep
) -> WebhookDeliveryRead:
    """A settled delivery (`succeeded` or `dead_letter`) goes out again now, with its id and
    payload and a fresh budget of attempts. 409 `invalid_transition` while it is `pending`
    (it is on its way)."""
    return await services.webhooks.redeliver(webhook_id, delivery_id)
