"""Outbound webhook shapes: a subscription (a URL and the event types it receives), the
deliveries made to it with each attempt, and the events of the `webhooks` stream."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.core.shapes import PatchBody
from app.core.states import DeliveryStatus
from app.core.vocabulary import WebhookEventType
from app.events.schemas import PersistedEvent, Stamped

URL_MAX_CHARS = 2_000
# An http(s) URL: a host (a name, or an IPv6 address in brackets), no credentials, a port
# from 1 to 65535 if any, then a path, query or fragment; no whitespace or control
# characters anywhere.
_HOST = r"(?:\[[0-9A-Fa-f:.]+\]|[^\s\x00-\x1f\x7f/?#@\[\]:\\]+)"
_PORT = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
URL_PATTERN = rf"^[Hh][Tt][Tt][Pp][Ss]?://{_HOST}(?::{_PORT})?(?:[/?#][^\s\x00-\x1f\x7f]*)?$"


def checked_http_url(url: str) -> str:
    """What the pattern cannot say: an IP address in brackets must be an IPv6 address.
    (The address policy, which needs the settings, is checked by the command.)"""
    try:
        urlsplit(url).port  # noqa: B018 (a bracketed host that is no IPv6 address raises)
    except ValueError as exc:
        raise ValueError(f"is not a URL: {exc}") from None
    return url


WebhookUrl = Annotated[
    str,
    Field(
        min_length=1,
        max_length=URL_MAX_CHARS,
        pattern=URL_PATTERN,
        examples=["https://hooks.example.com/loopwright"],
    ),
    AfterValidator(checked_http_url),
]
Description = Annotated[str, Field(max_length=2_000)]
EventTypes = Annotated[
    list[WebhookEventType],
    Field(
        min_length=1,
        max_length=len(WebhookEventType),
        description="The events sent to the URL (a type listed twice counts once).",
        examples=[["agent_run.completed", "agent_run.failed"]],
    ),
    AfterValidator(lambda types: list(dict.fromkeys(types))),
]


class WebhookCreate(BaseModel):
    """A URL to send events to. It must reach a public address, unless the operator allows
    private ones (`LOOPWRIGHT_WEBHOOKS__ALLOW_PRIVATE`, `…__ALLOWED_NETWORKS`)."""

    model_config = ConfigDict(extra="forbid")

    url: WebhookUrl
    event_types: EventTypes
    description: Description = ""
    enabled: bool = Field(True, description="A disabled webhook gets no new deliveries.")


class WebhookPatch(PatchBody):
    """Fields to change; the ones absent stay as they are. No field of a webhook may be
    null. Deliveries not yet sent go to the new URL."""

    url: WebhookUrl | None = None
    event_types: EventTypes | None = None
    description: Description | None = None
    enabled: bool | None = Field(
        None,
        description="A disabled webhook gets no new deliveries, and those still pending wait "
        "until it is enabled again.",
    )


class WebhookRead(BaseModel):
    """A subscription. `version` doubles as the ETag. Its secret is shown only when it is
    made (create, `rotate-secret`)."""

    model_config = ConfigDict(extra="forbid", from_attributes=True)

    id: str = Field(examples=["wh_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    url: str
    description: str
    event_types: list[WebhookEventType]
    enabled: bool
    version: int
    created_at: datetime
    updated_at: datetime


class WebhookWithSecret(WebhookRead):
    """A subscription with the secret that signs its deliveries: keep it, it is not shown
    again (rotate it to get a new one)."""

    secret: str = Field(
        description="The HMAC-SHA256 key of `Loopwright-Signature` (see the README).",
        examples=["whsec_3q2X…"],
    )


class WebhookPayload(BaseModel):
    """What a delivery POSTs (as JSON): one event, as its stream holds it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The delivery's id (also `Loopwright-Delivery`).")
    type: WebhookEventType = Field(description="The event's type (also `Loopwright-Event`).")
    stream: str = Field(
        description="The stream the event was written to: `approvals`, `triggers`, "
        "`workflow:<execution id>`, or a run's lane, `lane:<lane>`.",
        examples=["lane:default"],
    )
    seq: int = Field(description="Its sequence number in that stream.")
    created_at: datetime = Field(description="When the event was written.")
    data: dict[str, Any] = Field(
        description="The event's data, as the stream's events carry it (a run's events also "
        "carry `lane`)."
    )


class WebhookDeliveryRead(BaseModel):
    """One event sent (or to be sent) to one webhook, with its latest attempt."""

    model_config = ConfigDict(extra="forbid", from_attributes=True)

    id: str = Field(examples=["whd_01jd2x7k8m9n0p1q2r3s4t5v6w"])
    webhook_id: str
    event_type: WebhookEventType
    status: DeliveryStatus
    attempts: int = Field(description="Attempts made, over every redeliver.")
    next_attempt_at: datetime | None = Field(
        description="`pending`: when the next attempt is due (while one is in flight, when "
        "it is retried if its outcome never comes back); null once settled."
    )
    last_status_code: int | None = Field(description="The latest attempt's HTTP status.")
    last_latency_ms: int | None = Field(description="How long the latest attempt took.")
    last_response: str | None = Field(
        description="The start of the latest answer's body (`webhooks.response_excerpt_chars`)."
    )
    last_error: str | None = Field(
        description="Why the latest attempt failed when no status explains it (a refused "
        "address, a timeout, a connection error)."
    )
    payload: WebhookPayload
    created_at: datetime
    delivered_at: datetime | None = Field(description="When a receiver answered 2xx.")


class WebhookDeliveryAttemptRead(BaseModel):
    """One attempt at a delivery."""

    model_config = ConfigDict(extra="forbid", from_attributes=True)

    attempt: int = Field(description="1 for the first attempt, counting across redelivers.")
    started_at: datetime
    succeeded: bool
    status_code: int | None
    latency_ms: int
    response_excerpt: str | None
    error: str | None


class WebhookDeliveryDetail(WebhookDeliveryRead):
    """A delivery with each of its attempts, oldest first."""

    attempt_log: list[WebhookDeliveryAttemptRead]


# -- the `webhooks` stream -----------------------------------------------------------------


class WebhookDeliveryEventType(StrEnum):
    """What happened to a delivery. These are not themselves sent to webhooks."""

    SUCCEEDED = "webhook.delivery.succeeded"  # the receiver answered 2xx
    FAILED = "webhook.delivery.failed"  # an attempt failed; a retry follows at `next_attempt_at`
    DEAD_LETTERED = "webhook.delivery.dead_lettered"  # its last attempt failed
    REDELIVERED = "webhook.delivery.redelivered"  # a person sent it again


class WebhookDeliveryEventData(Stamped):
    webhook_id: str
    delivery_id: str
    event_type: WebhookEventType = Field(description="The type of the event delivered.")
    attempt: int = Field(description="The attempt this event is about (redelivered: made so far).")
    status_code: int | None = Field(None, description="The answer's HTTP status.")
    latency_ms: int | None = None
    error: str | None = None
    next_attempt_at: datetime | None = Field(None, description="`failed`, `redelivered`.")


class WebhookDeliveryEvent(PersistedEvent):
    """One event of `GET /v1/webhooks/events`."""

    event: WebhookDeliveryEventType
    data: WebhookDeliveryEventData
