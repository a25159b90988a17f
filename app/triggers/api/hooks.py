"""`POST /v1/hooks/{trigger_id}`: a webhook delivery. The one route that takes no API key:
the trigger's own secret signs each request (`app/core/signatures.py`)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, Response, status

from app.core.errors import ValidationFailed
from app.core.signatures import MAX_HEADER_CHARS, SIGNATURE_HEADER
from app.http.deps import ServicesDep
from app.http.input_guard import body_errors
from app.triggers.schemas import HookAccepted

DELIVERY_HEADER = "Loopwright-Delivery"
GITHUB_DELIVERY_HEADER = "X-GitHub-Delivery"
_DELIVERY_PATTERN = r"^[\x21-\x7e]{1,200}$"  # visible ASCII

router = APIRouter(prefix="/v1/hooks", tags=["hooks"])

_DESCRIPTION = f"""\
Fires the webhook trigger `trigger_id` with the JSON object of the body as `payload`.

**No API key**: this route is open to the senders of webhooks; the trigger's secret
(returned when the trigger was created, or by `rotate-secret`) authenticates each request.
Sign it as Stripe does: `{SIGNATURE_HEADER}: t=<unix seconds>,v1=<hex>`, where the hex is
HMAC-SHA256, keyed with the secret, of the timestamp, a `.` and the raw body. A missing
signature or one that does not match is a 401 (`signature_missing`, `signature_invalid`);
a timestamp more than the tolerance (`LOOPWRIGHT_TRIGGERS__SIGNATURE_TOLERANCE_S`, 300 s)
from the server's clock a 401 `signature_expired`; a signature accepted before a 409
`signature_reused`.

`{DELIVERY_HEADER}` (or GitHub's `{GITHUB_DELIVERY_HEADER}`) names the delivery: a repeat
of the id (a sender's retry, signed again or not) is answered with the first answer
(`Idempotent-Replayed: true`) and starts nothing. Without it, the signature names the
delivery, and the same signed request again is refused as reused.

The body must be a JSON object, and match the trigger's `payload_schema` if it has one
(422 naming the field: `body.issue.title`). The request body limit applies. A disabled
trigger answers 409 `trigger_disabled`; an unknown trigger, or one that is not a webhook,
404. The answer, 202, says what the fire started; a target that could not start (its
agent deleted, its lane busy under `multitask: reject`) is `status: failed` with the
`error`, recorded in the trigger's fire log."""

_REQUEST_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "additionalProperties": True,
                "description": "The payload: any JSON object (the trigger's "
                "`payload_schema`, when it has one, says which).",
            }
        }
    },
}
_PROBLEMS = {
    "401": "`signature_missing`, `signature_invalid` or `signature_expired` (no API key is "
    "needed here: the trigger's secret signs the request).",
    "404": "No webhook trigger has this id.",
    "409": "`trigger_disabled`, or `signature_reused`: this signed request was accepted before.",
}


@router.post(
    "/{trigger_id}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=HookAccepted,
    summary="Deliver a webhook",
    description=_DESCRIPTION,
    openapi_extra={
        "requestBody": _REQUEST_BODY,
        "x-problem-descriptions": _PROBLEMS,
        "security": [],  # no API key: the trigger's secret signs the request
    },
)
async def deliver_webhook(
    trigger_id: str,
    request: Request,
    response: Response,
    services: ServicesDep,
    signature: Annotated[
        str | None,
        Header(
            alias=SIGNATURE_HEADER,
            max_length=MAX_HEADER_CHARS,
            description="`t=<unix seconds>,v1=<hex HMAC-SHA256 of f'{t}.' + body>`.",
        ),
    ] = None,
    delivery_id: Annotated[
        str | None,
        Header(
            alias=DELIVERY_HEADER,
            pattern=_DELIVERY_PATTERN,
            description="The delivery's id: a repeat gets the first answer again.",
        ),
    ] = None,
    github_delivery_id: Annotated[
        str | None,
        Header(
            alias=GITHUB_DELIVERY_HEADER,
            pattern=_DELIVERY_PATTERN,
            description=f"GitHub's name for `{DELIVERY_HEADER}` (used when that is absent).",
        ),
    ] = None,
) -> HookAccepted:
    raw = await request.body()
    delivery = await services.hooks.authenticate(trigger_id, raw, signature)
    answer = await services.hooks.deliver(
        delivery,
        _payload(raw),
        headers=request.headers,
        delivery_id=delivery_id or github_delivery_id,
    )
    response.status_code = answer.status_code
    if answer.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return answer.body


def _payload(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, or a 422: not JSON, not an object, or holding what
    Postgres cannot store (NaN, NUL characters)."""
    unstorable = body_errors(raw)
    if unstorable:
        raise ValidationFailed(unstorable)
    try:
        payload = json.loads(raw)
    except ValueError:
        raise ValidationFailed.field("body", "the body is not valid JSON") from None
    if not isinstance(payload, dict):
        raise ValidationFailed.field("body", "must be a JSON object")
    return payload
